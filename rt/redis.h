/*
 * Redis on the loop: hiredis's async context driven by our own glue (a uv_poll_t on its socket
 * and a uv_timer_t for timeouts; hiredis's libuv adapter is not used, it ignores poll errors, so
 * refused and reset connections went unnoticed). Two connections per worker: one for commands
 * and one for subscriptions (subscribe mode forbids other commands). Both reconnect with backoff
 * (100 ms doubling to 5 s). While the command connection is down, commands fail at once
 * (callback with reply NULL); subscriptions are re-issued after a reconnect.
 */
#pragma once
#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* reply is NULL on any failure (not connected, timeout, connection lost); it is freed after the
 * callback returns. */
typedef void (*redis_reply_cb)(redisReply *reply, void *data);
/* A message on a subscribed channel. */
typedef void (*redis_message_cb)(const char *channel, const char *msg, size_t len, void *data);

/* url: redis://[:password@]host:port[/db]. Returns 0; connecting goes on in the background. */
int redis_init(uv_loop_t *loop, const char *url);
void redis_shutdown(void);
bool redis_connected(void);
/* True once the command connection's first attempt has ended: connected, or refused, failed or
 * timed out (REDIS_CONNECT_TIMEOUT_MS, 5 s). A worker serves from then on (main.c). */
bool redis_first_attempt_done(void);

/* printf-style command (hiredis format: %s strings, %b binary with size_t length). cb may be NULL.
 * Commands time out after 2 s. */
void redis_command(redis_reply_cb cb, void *data, const char *fmt, ...);
void redis_command_argv(redis_reply_cb cb, void *data, int argc, const char **argv,
                        const size_t *lens);

/* PUBLISH, retried (bounded queue, oldest dropped with a warning) while Redis is down. */
void redis_publish(const char *channel, const char *msg, size_t len);
/* Any command with redis_publish's guarantee: sent at least once, queued while Redis is down and
 * sent again when the connection went away with it in flight. No reply; argv[label_arg] names it
 * in warnings. */
void redis_command_retry(int argc, const char **argv, const size_t *lens, int label_arg);

/* Subscriptions are refcounted per channel: the first subscribe sends SUBSCRIBE, the last
 * unsubscribe sends UNSUBSCRIBE. One handler for all messages (the SSE hub). */
void redis_set_message_handler(redis_message_cb cb, void *data);
void redis_subscribe(const char *channel);
/* Messages of `channel` (a string that lives forever) go to cb instead of the general handler.
 * Subscribe to it as to any channel. */
void redis_set_channel_handler(const char *channel, redis_message_cb cb, void *data);
/* cb(channel) runs when a SUBSCRIBE is confirmed: from then on every message published on the
 * channel arrives (also after a re-subscribe that follows a lost subscriber connection). */
void redis_set_subscribed_handler(void (*cb)(const char *channel, void *data), void *data);
/* True while the channel is subscribed on a live subscriber connection. */
bool redis_channel_active(const char *channel);
/* Writes the queued commands to the socket now instead of on the next loop turn, so a PUBLISH
 * leaves before a reply the caller is about to send. Non-blocking. */
void redis_flush(void);
/* Reads and dispatches the messages already waiting on the subscriber connection now, without
 * waiting for the loop to poll it. Non-blocking; does nothing when called from inside a message
 * handler (that read is still going on), nor a second time in one loop turn: the lookups of one
 * turn share one read (what arrives later is polled at the next turn, as without a drain). */
void redis_sub_drain(void);
/* Changes whenever the subscriber connection was lost: messages published meanwhile are gone. */
unsigned redis_sub_epoch(void);
void redis_unsubscribe(const char *channel);

/* Health: PING with a 1 s timeout; cb(ok). */
void redis_ping(void (*cb)(bool ok, void *data), void *data);

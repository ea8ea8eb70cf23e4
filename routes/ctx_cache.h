/*
 * Caller-context cache: each worker keeps the row that the router guard's caller query returned
 * (session, user status and roles, profile, active organization and membership, invite gate),
 * keyed by session-token hash and X-Organization-Id, so a request with a known session needs no
 * database round trip before its handler.
 *
 * What must hold: once a write that changes a caller context has been answered, every later
 * request on every worker of every host sees the change (read-your-writes), whatever order
 * Redis writes its sockets in.
 *
 * The mechanism
 *  - Every worker has a random id and subscribes, on its subscriber connection, to CTX_CHANNEL
 *    and to its own channels coachd:ctx-ack:<id> and coachd:ctx-hb:<id>.
 *  - A write that changes a caller context commits, drops the matching entries of its own
 *    worker, and PUBLISHes "<its id> <nonce> <k:value>" on CTX_CHANNEL through its command
 *    connection (ctx_invalidate_then*). PUBLISH's integer reply N is the number of subscribers
 *    (live workers of every host, the writer included) that were handed the message.
 *  - A worker that reads an invalidation drops the matching entries, bumps the generation (so a
 *    lookup in flight does not store its row), then PUBLISHes the nonce on the writer's ack
 *    channel (the writer counts its own copy directly).
 *  - The writer answers its HTTP request once it has N acknowledgements, or once ACK_WAIT_MS (W)
 *    have passed since the PUBLISH reply reached it, whichever comes first.
 *  - The lease: every LEASE_MS/4 each worker PUBLISHes its uv_hrtime() on its own heartbeat
 *    channel (command connection). A worker serves a cache hit only if the newest heartbeat it
 *    has RECEIVED back on its subscriber connection was sent at most LEASE_MS (X) ago; W = 1.5 X.
 *  - Before an entry is trusted, what is already waiting on the subscriber socket is read and
 *    applied (redis_sub_drain), so in the common case the invalidation is applied before the
 *    lookup whatever the timing.
 *
 * The argument. Take a write answered at time a and a later request (t > a: the client had
 * the answer before it sent the request) served from the cache of worker K. Let p be when Redis
 * handled the invalidation's PUBLISH and q when its reply reached the writer (p <= q).
 *  1. K was among the N receivers and acknowledged: K acknowledges only after dropping its
 *     entries and bumping its generation, so at t K holds no entry the write made stale: an
 *     entry stored later came from a lookup that started after K applied the message, hence
 *     after the commit (a lookup that started earlier has an older generation and is not
 *     stored).
 *  2. K was among the N receivers but the writer stopped waiting: then a >= q + W. The hit at t
 *     needs a heartbeat of K sent at s >= t - X, and Redis handled that heartbeat no earlier
 *     than s > a - X >= q + W - X > q >= p. Redis writes the messages of one subscriber
 *     connection in the order it handled the PUBLISHes (one output buffer per client, and the
 *     server handles commands one at a time), so K read the invalidation before that
 *     heartbeat, and applied it before t: case 1's reasoning holds from there. Durations are
 *     measured on each host's monotonic clock (uv_hrtime): the send time is taken before the
 *     PUBLISH is written and q when the reply is handled, both on the safe side; only the clock
 *     rates, not their offsets, enter (W - X = 100 ms of margin).
 *  3. K was not among the N receivers: its subscription was not active when Redis handled the
 *     PUBLISH. A worker whose subscriber connection is lost empties its cache and keeps it off
 *     until CTX_CHANNEL is subscribed again (redis_sub_epoch, redis_channel_active); a lookup
 *     that was in flight across the loss, or that started before the subscription became
 *     active, is not stored (the generation moves when it becomes active). A worker that
 *     subscribed for the first time started empty. So every entry K has was read by a lookup
 *     that started after K's subscription was active, which was after p, hence after the
 *     commit.
 *  The writer's own worker dropped its entries before publishing (case 1 without the wait).
 *
 * What is not covered, bounded by CONTEXT_CACHE_TTL_MS (default 5 s) as before:
 *  - writes outside the API (an operator's UPDATE, an invite passing its expiry); session
 *    expiry itself is checked on every hit;
 *  - a writer that cannot reach Redis at all (PUBLISH fails): it answers, and the message is
 *    queued and sent again once Redis is back.
 * Which writes must invalidate is not left to memory: tests/api/test_context_invalidation.py
 * lists every named statement in db/queries that writes a table of the caller row and fails when
 * the route code that runs it does not reach a ctx_invalidate_then* of the matching kind.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "core/http.h"
#include "db/q_context.h"

#define CTX_CHANNEL "coachd:ctx-invalidate"
/* The caller row: the columns of SQL_CONTEXT_CALLER (db/queries/context.sql), read with its
 * CONTEXT_CALLER_* enum. */
typedef struct ctx_row {
    const char *v[CONTEXT_CALLER_NCOLS]; /* NULL for SQL NULL */
    int len[CONTEXT_CALLER_NCOLS];
} ctx_row_t;

void ctx_cache_init(uv_loop_t *loop);
/* The generation to pass to ctx_cache_put for a lookup starting now. */
unsigned ctx_cache_gen(void);
/* A fresh entry for (token hash, organization header or NULL): fills `out` with pointers that
 * stay valid until the next call into this module. */
bool ctx_cache_get(const char *hash, const char *org, ctx_row_t *out);
/* Stores a row read by a lookup that started at generation `gen`. */
void ctx_cache_put(const char *hash, const char *org, unsigned gen, const ctx_row_t *row);
/* Forgets this worker's entries of one session (after its sliding refresh moved the expiry). */
void ctx_cache_drop_session_local(const char *session_id);

/* After commit, invalidate on every worker and host the contexts named by `kind` and `value`:
 * 's' a session, 'u' every session of a user, 'e' the user with this email (invites are
 * addressed by email), 'o' every caller whose active or current organization it is (a NULL or
 * empty value drops everything). Then done(req), once every worker that received the message
 * acknowledged it or ACK_WAIT_MS passed (see above): a reply sent from done() is never
 * overtaken. done is skipped when the client has gone. */
void ctx_invalidate_then(http_req_t *req, char kind, const char *value,
                         void (*done)(http_req_t *req));
/* The message a process that is not a worker (an operator command, cli/end_sessions.c)
 * PUBLISHes on CTX_CHANNEL to drop (kind, value) on every worker, as above; a NULL or empty value
 * drops everything. It asks for no acknowledgement (the sender has no worker id: nonce 0). The
 * length written, or -1 when `cap` is too small. */
int ctx_invalidation_message(char *out, size_t cap, char kind, const char *value);
/* ctx_invalidate_then, then replies `json` (copied) with `status`; json NULL replies 500. */
void ctx_invalidate_then_reply(http_req_t *req, char kind, const char *value, int status,
                               const char *json, size_t len);

/*
 * SSE stream hub of one worker.
 *
 * Each open stream subscribes to a few Redis channels (rt/events.h names them): its event
 * channel (mentorship:<id> or user:<id>) and the user's control channel. The hub maps each channel
 * to the streams that hold it; the first stream of a channel SUBSCRIBEs, the last one leaving
 * UNSUBSCRIBEs, so a worker only hears what its own streams need, and a POST answered by any
 * worker or host reaches every stream through Redis.
 *
 * An event arriving from Redis is encoded once into a shared buffer and queued on every stream of
 * the channel. Each stream's unflushed bytes are capped; a client that falls further behind is
 * disconnected (it refetches on reconnect, as the interface says).
 *
 * Pings: one 1-second timer per worker walks a 25-slot wheel; each stream sits in one slot, so it
 * gets a ping every 25 s, and a tick touches only 1/25 of the streams. The same tick refreshes the
 * stream owner's presence.
 *
 * Ownership: a stream_t is freed by exactly one of stream_close (the hub decides: slow client,
 * failed write, session ended, shutdown) or on_gone (the connection went away, reported from the
 * loop). core/http never runs on_gone inside http_stream_write, so a write failing during a
 * fan-out returns -1 and the hub closes that stream itself; the streams it has not reached yet
 * are untouched. Walks over a channel's list keep the next element before each send, since a
 * send may free the current one.
 */
#pragma once
#include <stddef.h>
#include <uv.h>

#include "core/http.h"

#define STREAM_MAX_PENDING (256 * 1024)
#define STREAM_PING_SECONDS 25

typedef enum stream_kind {
    STREAM_MENTORSHIP,
    STREAM_USER,
} stream_kind_t;

void streams_init(uv_loop_t *loop);
void streams_shutdown(void);

/* Opens the SSE response on req (headers, `retry: 3000`) and registers it: kind USER listens on
 * user:<user_id>; kind MENTORSHIP on mentorship:<mentorship_id>. Both listen on the user's
 * control channel, which ends the stream when session_id is signed out, when organization_id's
 * membership is disabled (NULL: any), or when the user stops being active. */
void streams_open(http_req_t *req, stream_kind_t kind, const char *user_id, const char *session_id,
                  const char *mentorship_id, const char *organization_id);

/* Number of open streams on this worker. */
size_t streams_count(void);

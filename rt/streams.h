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
 * the channel; replayed history is read and encoded once per page and shared by the streams
 * resuming from the same place. Each stream's unflushed bytes are capped; a client that falls
 * further behind on live events is disconnected (it refetches on reconnect, as the interface says).
 * A replay instead waits for the client to drain its queue, and the history a worker holds for
 * replays is capped at REPLAY_MEMORY_MAX (rt/streams.c, "history").
 *
 * Pings: one 100 ms timer per worker walks a 250-slot wheel; each stream sits in one slot, so it
 * gets a ping every 25 s (the first 23.4 to 25 s after opening: a new stream takes the emptiest
 * of the nearby slots, so streams opened together are not all pinged in the same tick), and a
 * tick touches about 1/250 of the streams. The same tick refreshes the stream owner's presence.
 *
 * Ownership: a stream_t is freed by exactly one of stream_close (the hub decides: slow client,
 * failed write, session ended, shutdown) or on_gone (the connection went away, reported from the
 * loop). core/http never runs on_gone inside http_stream_write, so a write failing during a
 * fan-out returns -1 and the hub closes that stream itself; the streams it has not reached yet
 * are untouched. Walks over a channel's list keep the next element before each send, since a
 * send may free the current one.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/http.h"

#define STREAM_MAX_PENDING (256 * 1024)
/* The kernel's send buffer of a stream (doubled by Linux). Left to autotuning it grew to several
 * MiB for a client that never reads, before STREAM_MAX_PENDING saw a byte; events are small. */
#define STREAM_SNDBUF (64 * 1024)

typedef enum stream_kind {
    STREAM_MENTORSHIP,
    STREAM_USER,
} stream_kind_t;

void streams_init(uv_loop_t *loop);
void streams_shutdown(void);

/* At most this many open streams per user across every worker and host: opening another closes
 * that user's oldest (a per-user sorted set in Redis names them; the holder closes it when told
 * on the user's control channel). */
#define STREAM_MAX_PER_USER 20

/* What a stream is bound to besides its channel. */
typedef struct stream_auth {
    const char *session_id;
    int64_t session_expires_ms; /* the stream closes at this moment (epoch ms; 0: never) */
    /* USER streams: events carry their organization; the stream passes an event only when
     * all_orgs is set (PlatformAdmin, Owner) or its organization is one of orgs (the user's
     * active memberships, kept current by membership-enabled / -disabled control messages). */
    bool all_orgs;
    const char *const *orgs;
    int norgs;
} stream_auth_t;

/* Opens the SSE response on req (headers, `retry: 3000`) and registers it: kind USER listens on
 * user:<user_id>; kind MENTORSHIP on mentorship:<mentorship_id>. Both listen on the user's
 * control channel, which ends the stream when its session ends (signed out, every other session
 * ended by a password change or reset), when organization_id's membership is disabled (NULL:
 * any), when the user stops being active, or when the user opened too many streams. The session's
 * expiry is checked every tick (100 ms).
 *
 * Resuming: last_event_id (NULL: none) is the id of the last event the client received on this
 * channel. Once the channel is subscribed, the stream reads the channel's history (rt/events.h)
 * after it and writes it before any live event, dropping live events the history already gave;
 * an id the history cannot serve (trimmed away, unknown, unparseable, Redis unavailable) gets
 * one `reset` event instead. Every event's `id:` is its entry id in the channel's history, and a
 * ping's is the stream's position (the last event id it passed). */
void streams_open(http_req_t *req, stream_kind_t kind, const char *user_id,
                  const stream_auth_t *auth, const char *mentorship_id, const char *organization_id,
                  const char *last_event_id);

/* Number of open streams on this worker. */
size_t streams_count(void);

/* Live events fanned out on this worker since it started: how many, how many stream writes they
 * made, and the time from an event's arrival from Redis to its last stream's write (sum and
 * max, seconds): the worker's share of an event's delivery latency. */
typedef struct streams_fanout_stats {
    uint64_t events, deliveries;
    double seconds_sum, seconds_max;
} streams_fanout_stats_t;
streams_fanout_stats_t streams_fanout_stats(void);

/* History being replayed (Last-Event-ID, catch-up) on this worker: bytes of encoded entries
 * alive (in pages being written or in write queues; at most REPLAY_MEMORY_MAX with the reads in
 * flight), bytes reserved by reads in flight, bytes of live events held by streams while they
 * replay (counted per stream), and streams waiting to read for want of memory. */
typedef struct streams_replay_stats {
    size_t pending_bytes, reserved_bytes, held_bytes, waiting;
} streams_replay_stats_t;
streams_replay_stats_t streams_replay_stats(void);

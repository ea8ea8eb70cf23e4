/*
 * Real-time events leave through Redis pub/sub, so every worker and host holding a stream gets
 * them, and each event is also kept in a Redis stream so a client that reconnects with
 * Last-Event-ID gets what it missed (rt/streams.c replays it). Channels:
 *   mentorship:<mentorshipId>   events of one mentorship (the mentorship stream)
 *   user:<userId>               events for one user's stream (chat and session-update of all the
 *                               user's mentorships)
 *   user:<userId>:control       stream control: {"type":"session-ended","sessionId"},
 *                               {"type":"membership-disabled","organizationId"},
 *                               {"type":"membership-enabled","organizationId"},
 *                               {"type":"sessions-ended","keepSessionId"?} (every session
 *                               of the user but the one named, e.g. after a password change),
 *                               {"type":"user-inactive"}
 * History: the event channel C is kept in the Redis stream `events:C` (EVENTS_KEY_PREFIX), one
 * entry per event with the field `m` = the message below without its id. One Lua script per
 * event (or per batch of events) XADDs it to every channel's stream, trims each stream (to the
 * entries of the EVENT_HISTORY_SECONDS before the newest, and of those the last
 * EVENT_HISTORY_MAX, up to 100 more between trims), refreshes its expiry (EVENTS_KEY_TTL after
 * the newest event) and PUBLISHes it with the id XADD gave: the event's id on a channel is its
 * stream entry id ("<ms>-<seq>", monotonic per channel), live or replayed, and Redis runs the
 * script atomically, so the pub/sub order is the stream's order. Message on the event channels:
 *   {"id":"<entry id>","event":"<name>","organizationId":"<org>","data":<JSON>}
 * (data last). The organization lets a user stream drop events of organizations where the
 * user's membership is disabled.
 *
 * Publish only after the change that caused the event has committed.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Publishes `event` with `data_json` (a JSON value) on the mentorship's channel and, when
 * to_users is set, on the coach's and teacher's user channels (ids may be NULL to skip).
 * organization_id is the mentorship's organization: user streams carry an event only while the
 * user's membership there is active. Pass it for every mentorship event: an event without one is
 * not filtered. */
void events_publish(const char *organization_id, const char *mentorship_id, const char *coach_id,
                    const char *teacher_id, const char *event, const char *data_json,
                    bool to_users);
/* Publishes `event` once (one Redis call) on the mentorship's channel (when mentorship_id is not
 * NULL) and on the user channel of each of user_ids[0..n); NULL, empty and repeated ids are
 * skipped. organization_id is the mentorship's organization, as for events_publish: user streams
 * drop the event while the user's membership there is not active. */
void events_publish_to(const char *organization_id, const char *mentorship_id,
                       const char *const *user_ids, size_t n, const char *event,
                       const char *data_json);
/* Between events_batch_begin() and events_batch_end(), events_publish_to() and
 * events_publish() collect their events, and the end sends them all in one script call, in the
 * order they were published: the posts of one chat batch commit together, and their events cost
 * Redis one call (each stream trimmed once) instead of one per post. Not nested; nothing else
 * runs on the loop in between, so no other event can come between a batch's. */
void events_batch_begin(void);
void events_batch_end(void);
/* The control channel of a user (snprintf with the user id), and the message that ends every
 * stream of theirs; for a process without the loop's Redis (cli/end_sessions.c). */
#define EVENTS_CONTROL_CHANNEL_FMT "user:%s:control"
#define EVENTS_SESSIONS_ENDED_ALL "{\"type\":\"sessions-ended\"}"
/* Stream control message for one user (see above). */
void events_control(const char *user_id, const char *json);
/* Ends the open streams of every session of the user except keep_session_id (NULL: all). */
void events_sessions_ended(const char *user_id, const char *keep_session_id);
#define EVENTS_KEY_PREFIX "events:"
#define EVENTS_PREFIX_LEN_STR "7" /* strlen(EVENTS_KEY_PREFIX), for the Lua script */
/* A channel's history expires this long after its newest event. */
#define EVENTS_KEY_TTL_SECONDS (24 * 3600)

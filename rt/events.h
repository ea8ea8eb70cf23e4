/*
 * Real-time events leave through Redis pub/sub, so every worker and host holding a stream gets
 * them. Channels:
 *   mentorship:<mentorshipId>   events of one mentorship (the mentorship stream)
 *   user:<userId>               events for one user's stream (chat and session-update of all the
 *                               user's mentorships)
 *   user:<userId>:control       stream control: {"type":"session-ended","sessionId"},
 *                               {"type":"membership-disabled","organizationId"},
 *                               {"type":"membership-enabled","organizationId"},
 *                               {"type":"sessions-ended","keepSessionId"?} (every session
 *                               of the user but the one named, e.g. after a password change),
 *                               {"type":"user-inactive"}
 * Message on the event channels: {"id":"<event id>","event":"<name>","organizationId":"<org>",
 * "data":<JSON>} (data last). The id is made once at publish time so every stream shows the same
 * `id:` for the same event; the organization lets a user stream drop events of organizations
 * where the user's membership is disabled.
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
/* Publishes `event` once (one event id) on the mentorship's channel (when mentorship_id is not
 * NULL) and on the user channel of each of user_ids[0..n); NULL, empty and repeated ids are
 * skipped. organization_id is the mentorship's organization, as for events_publish: user streams
 * drop the event while the user's membership there is not active. */
void events_publish_to(const char *organization_id, const char *mentorship_id,
                       const char *const *user_ids, size_t n, const char *event,
                       const char *data_json);
/* Stream control message for one user (see above). */
void events_control(const char *user_id, const char *json);
/* Ends the open streams of every session of the user except keep_session_id (NULL: all). */
void events_sessions_ended(const char *user_id, const char *keep_session_id);
/* Makes an event id: milliseconds since the epoch, a dash, and a per-process sequence. */
void events_make_id(char out[48]);

/*
 * Status machines of docs/api.md. Routes check a user-driven PATCH with
 * transitions_*_check(); a move to the same status is an allowed no-op (the route answers 200
 * without writing). The *_parse functions take the API spelling ("pending", "scheduled", ...).
 *
 *   mentorship: pending -> active | ended; active -> paused | ended; paused -> active | ended;
 *               ended is final.
 *   session:    scheduled -> confirmed | cancelled | completed | missed;
 *               confirmed -> scheduled | cancelled | completed | missed;
 *               completed, missed and cancelled are final.
 */
#pragma once
#include <stdbool.h>

typedef enum mentorship_status {
    MENTORSHIP_STATUS_PENDING = 0,
    MENTORSHIP_STATUS_ACTIVE,
    MENTORSHIP_STATUS_PAUSED,
    MENTORSHIP_STATUS_ENDED,
} mentorship_status_t;

typedef enum session_status {
    SESSION_STATUS_SCHEDULED = 0,
    SESSION_STATUS_CONFIRMED,
    SESSION_STATUS_CANCELLED,
    SESSION_STATUS_COMPLETED,
    SESSION_STATUS_MISSED,
} session_status_t;

/* 0 and *out set, or DOMAIN_EINVAL for an unknown name (exact lower case). */
int transitions_mentorship_parse(const char *s, mentorship_status_t *out);
/* API name, or NULL for an out-of-range value. */
const char *transitions_mentorship_name(mentorship_status_t st);
/* 0 when from -> to is allowed (same -> same included), else DOMAIN_ETRANSITION. */
int transitions_mentorship_check(mentorship_status_t from, mentorship_status_t to);
bool transitions_mentorship_is_final(mentorship_status_t st);

int transitions_session_parse(const char *s, session_status_t *out);
const char *transitions_session_name(session_status_t st);
int transitions_session_check(session_status_t from, session_status_t to);
/* completed, missed, cancelled. */
bool transitions_session_is_final(session_status_t st);

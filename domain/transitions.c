/* Mentorship and session status machines as transition tables (see transitions.h). */
#include "domain/transitions.h"

#include <stddef.h>
#include <string.h>

#include "domain/err.h"

static const char *const mentorship_names[] = {"pending", "active", "paused", "ended"};
static const char *const session_names[] = {"scheduled", "confirmed", "cancelled", "completed",
                                            "missed"};

#define N_MENTORSHIP 4
#define N_SESSION 5

/* allowed[from][to]; the diagonal is the same-status no-op. */
static const bool mentorship_allowed[N_MENTORSHIP][N_MENTORSHIP] = {
    /*                 pending active paused ended */
    [MENTORSHIP_STATUS_PENDING] = {true, true, false, true},
    [MENTORSHIP_STATUS_ACTIVE] = {false, true, true, true},
    [MENTORSHIP_STATUS_PAUSED] = {false, true, true, true},
    [MENTORSHIP_STATUS_ENDED] = {false, false, false, true},
};

static const bool session_allowed[N_SESSION][N_SESSION] = {
    /*                 scheduled confirmed cancelled completed missed */
    [SESSION_STATUS_SCHEDULED] = {true, true, true, true, true},
    [SESSION_STATUS_CONFIRMED] = {true, true, true, true, true},
    [SESSION_STATUS_CANCELLED] = {false, false, true, false, false},
    [SESSION_STATUS_COMPLETED] = {false, false, false, true, false},
    [SESSION_STATUS_MISSED] = {false, false, false, false, true},
};

int transitions_mentorship_parse(const char *s, mentorship_status_t *out)
{
    if (s == NULL) return DOMAIN_EINVAL;
    for (int i = 0; i < N_MENTORSHIP; i++) {
        if (strcmp(s, mentorship_names[i]) == 0) {
            *out = (mentorship_status_t)i;
            return 0;
        }
    }
    return DOMAIN_EINVAL;
}

const char *transitions_mentorship_name(mentorship_status_t st)
{
    return (unsigned)st < N_MENTORSHIP ? mentorship_names[st] : NULL;
}

int transitions_mentorship_check(mentorship_status_t from, mentorship_status_t to)
{
    if ((unsigned)from >= N_MENTORSHIP || (unsigned)to >= N_MENTORSHIP) return DOMAIN_ETRANSITION;
    return mentorship_allowed[from][to] ? 0 : DOMAIN_ETRANSITION;
}

bool transitions_mentorship_is_final(mentorship_status_t st)
{
    return st == MENTORSHIP_STATUS_ENDED;
}

int transitions_session_parse(const char *s, session_status_t *out)
{
    if (s == NULL) return DOMAIN_EINVAL;
    for (int i = 0; i < N_SESSION; i++) {
        if (strcmp(s, session_names[i]) == 0) {
            *out = (session_status_t)i;
            return 0;
        }
    }
    return DOMAIN_EINVAL;
}

const char *transitions_session_name(session_status_t st)
{
    return (unsigned)st < N_SESSION ? session_names[st] : NULL;
}

int transitions_session_check(session_status_t from, session_status_t to)
{
    if ((unsigned)from >= N_SESSION || (unsigned)to >= N_SESSION) return DOMAIN_ETRANSITION;
    return session_allowed[from][to] ? 0 : DOMAIN_ETRANSITION;
}

bool transitions_session_is_final(session_status_t st)
{
    return st == SESSION_STATUS_CANCELLED || st == SESSION_STATUS_COMPLETED ||
           st == SESSION_STATUS_MISSED;
}

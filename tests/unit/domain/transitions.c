/* Unit tests for domain/transitions: every pair of both machines against docs/api.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/transitions.h"

static void test_mentorship_parse(void **state)
{
    static const char *const names[] = {"pending", "active", "paused", "ended"};
    mentorship_status_t st;
    (void)state;

    for (int i = 0; i < 4; i++) {
        assert_int_equal(transitions_mentorship_parse(names[i], &st), 0);
        assert_int_equal(st, i);
        assert_string_equal(transitions_mentorship_name(st), names[i]);
    }
    assert_int_equal(transitions_mentorship_parse("Active", &st), DOMAIN_EINVAL);
    assert_int_equal(transitions_mentorship_parse("", &st), DOMAIN_EINVAL);
    assert_int_equal(transitions_mentorship_parse(NULL, &st), DOMAIN_EINVAL);
    assert_int_equal(transitions_mentorship_parse("scheduled", &st), DOMAIN_EINVAL);
    assert_null(transitions_mentorship_name((mentorship_status_t)9));
}

static void test_mentorship_machine(void **state)
{
    /* allowed[from][to] written out from docs/api.md. */
    static const char *const allowed[] = {
        "pending->pending", "pending->active", "pending->ended", "active->active", "active->paused",
        "active->ended",    "paused->paused",  "paused->active", "paused->ended",  "ended->ended",
    };
    (void)state;

    for (int f = 0; f < 4; f++) {
        for (int t = 0; t < 4; t++) {
            char pair[32];
            bool want = false;
            snprintf(pair, sizeof pair, "%s->%s", transitions_mentorship_name(f),
                     transitions_mentorship_name(t));
            for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
                if (strcmp(pair, allowed[i]) == 0) want = true;
            int rc = transitions_mentorship_check(f, t);
            if (want)
                assert_int_equal(rc, 0);
            else
                assert_int_equal(rc, DOMAIN_ETRANSITION);
        }
    }
    assert_int_equal(
        transitions_mentorship_check(MENTORSHIP_STATUS_ENDED, MENTORSHIP_STATUS_ACTIVE),
        DOMAIN_ETRANSITION);
    assert_int_equal(
        transitions_mentorship_check(MENTORSHIP_STATUS_PAUSED, MENTORSHIP_STATUS_PENDING),
        DOMAIN_ETRANSITION);
    assert_int_equal(transitions_mentorship_check((mentorship_status_t)7, MENTORSHIP_STATUS_ACTIVE),
                     DOMAIN_ETRANSITION);
    assert_true(transitions_mentorship_is_final(MENTORSHIP_STATUS_ENDED));
    assert_false(transitions_mentorship_is_final(MENTORSHIP_STATUS_PAUSED));
}

static void test_session_parse(void **state)
{
    static const char *const names[] = {"scheduled", "confirmed", "cancelled", "completed",
                                        "missed"};
    session_status_t st;
    (void)state;

    for (int i = 0; i < 5; i++) {
        assert_int_equal(transitions_session_parse(names[i], &st), 0);
        assert_int_equal(st, i);
        assert_string_equal(transitions_session_name(st), names[i]);
    }
    assert_int_equal(transitions_session_parse("canceled", &st), DOMAIN_EINVAL);
    assert_int_equal(transitions_session_parse(NULL, &st), DOMAIN_EINVAL);
    assert_null(transitions_session_name((session_status_t)5));
}

static void test_session_machine(void **state)
{
    static const char *const allowed[] = {
        "scheduled->scheduled", "scheduled->confirmed", "scheduled->cancelled",
        "scheduled->completed", "scheduled->missed",    "confirmed->scheduled",
        "confirmed->confirmed", "confirmed->cancelled", "confirmed->completed",
        "confirmed->missed",    "cancelled->cancelled", "completed->completed",
        "missed->missed",
    };
    (void)state;

    for (int f = 0; f < 5; f++) {
        for (int t = 0; t < 5; t++) {
            char pair[32];
            bool want = false;
            snprintf(pair, sizeof pair, "%s->%s", transitions_session_name(f),
                     transitions_session_name(t));
            for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
                if (strcmp(pair, allowed[i]) == 0) want = true;
            int rc = transitions_session_check(f, t);
            if (want)
                assert_int_equal(rc, 0);
            else
                assert_int_equal(rc, DOMAIN_ETRANSITION);
        }
    }
    assert_true(transitions_session_is_final(SESSION_STATUS_CANCELLED));
    assert_true(transitions_session_is_final(SESSION_STATUS_COMPLETED));
    assert_true(transitions_session_is_final(SESSION_STATUS_MISSED));
    assert_false(transitions_session_is_final(SESSION_STATUS_SCHEDULED));
    assert_false(transitions_session_is_final(SESSION_STATUS_CONFIRMED));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mentorship_parse),
        cmocka_unit_test(test_mentorship_machine),
        cmocka_unit_test(test_session_parse),
        cmocka_unit_test(test_session_machine),
    };
    return cmocka_run_group_tests_name("domain/transitions", tests, NULL, NULL);
}

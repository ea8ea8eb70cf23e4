/* Unit tests for domain/mail_templates. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "domain/err.h"
#include "domain/mail_templates.h"
#include "domain/text.h"

static void assert_contains(const char *hay, const char *needle)
{
    if (strstr(hay, needle) == NULL) fail_msg("\"%s\" not found in:\n%s", needle, hay);
}

static void assert_lacks(const char *hay, const char *needle)
{
    if (strstr(hay, needle) != NULL) fail_msg("\"%s\" unexpectedly in:\n%s", needle, hay);
}

static void assert_well_formed(const mail_msg_t *m)
{
    assert_non_null(m->subject);
    assert_non_null(m->text);
    assert_non_null(m->html);
    assert_true(text_utf8_valid(m->subject, strlen(m->subject)));
    assert_true(text_utf8_valid(m->text, strlen(m->text)));
    assert_true(text_utf8_valid(m->html, strlen(m->html)));
    assert_null(strchr(m->subject, '\n'));
    assert_null(strchr(m->subject, '\r'));
    assert_contains(m->html, "<!DOCTYPE html>");
    assert_contains(m->html, "</html>");
}

static void test_verification(void **state)
{
    mail_msg_t m = {0};
    const char *link = "https://api.example.com/api/auth/verify-email?token=abc&callbackURL=%2F";
    (void)state;

    assert_int_equal(mail_render_verification("en", link, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Verify your email address");
    assert_contains(m.text, link); /* raw in the text part */
    assert_contains(m.text, "24 hours");
    /* Escaped in the HTML part, both as the href and as the visible text. */
    assert_contains(m.html, "<a href=\"https://api.example.com/api/auth/verify-email?token=abc"
                            "&amp;callbackURL=%2F\">");
    assert_lacks(m.html, "token=abc&callbackURL");
    assert_contains(m.html, "<html lang=\"en\">");
    mail_msg_free(&m);
    assert_null(m.subject);
    mail_msg_free(&m); /* twice is harmless */

    assert_int_equal(mail_render_verification("es", link, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Verifica tu dirección de correo electrónico");
    assert_contains(m.text, "24 horas");
    assert_contains(m.html, "<html lang=\"es\">");
    mail_msg_free(&m);

    /* Anything other than "es" is English. */
    assert_int_equal(mail_render_verification("fr", link, &m), 0);
    assert_string_equal(m.subject, "Verify your email address");
    mail_msg_free(&m);
    assert_int_equal(mail_render_verification(NULL, link, &m), 0);
    assert_string_equal(m.subject, "Verify your email address");
    mail_msg_free(&m);

    assert_int_equal(mail_render_verification("en", NULL, &m), DOMAIN_EINVAL);
}

static void test_reset(void **state)
{
    mail_msg_t m = {0};
    (void)state;

    assert_int_equal(mail_render_password_reset("en", "https://x.test/r/T", &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Reset your password");
    assert_contains(m.text, "https://x.test/r/T");
    assert_contains(m.text, "1 hour");
    mail_msg_free(&m);

    assert_int_equal(mail_render_password_reset("es", "https://x.test/r/T", &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Restablece tu contraseña");
    assert_contains(m.text, "1 hora");
    assert_contains(m.html, "<a href=\"https://x.test/r/T\">https://x.test/r/T</a>");
    mail_msg_free(&m);
}

static void test_invite(void **state)
{
    mail_msg_t m = {0};
    (void)state;

    assert_int_equal(mail_render_invite("en", "https://app.test/invite/tok", "Acme <School>",
                                        ROLE_COACH, "Ana & Bob", &m),
                     0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "You're invited to join Acme <School>");
    assert_contains(m.text, "Ana & Bob has invited you to join Acme <School> with the Coach role.");
    assert_contains(m.html, "Ana &amp; Bob has invited you to join Acme &lt;School&gt;");
    assert_lacks(m.html, "<School>");
    assert_contains(m.html, "<title>You&#39;re invited to join Acme &lt;School&gt;</title>");
    mail_msg_free(&m);

    assert_int_equal(
        mail_render_invite("es", "https://app.test/i", "Escuela Sol", ROLE_TEACHER, NULL, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Invitación para unirte a Escuela Sol");
    assert_contains(m.text, "Te han invitado a unirte a Escuela Sol con el rol de Docente.");
    mail_msg_free(&m);

    assert_int_equal(
        mail_render_invite("es", "https://app.test/i", "Sol", ROLE_ORG_ADMIN, "Luis", &m), 0);
    assert_contains(m.text, "Luis te ha invitado a unirte a Sol con el rol de Administrador de "
                            "la organización.");
    mail_msg_free(&m);

    assert_int_equal(mail_render_invite("en", "https://app.test/i", "Sol", ROLE_MANAGER, "", &m),
                     0);
    assert_contains(m.text, "You have been invited to join Sol with the Manager role.");
    mail_msg_free(&m);

    /* A header-injection attempt through the organization name stays on one subject line. */
    assert_int_equal(mail_render_invite("en", "https://app.test/i", "Evil\r\nBcc: x@evil.test",
                                        ROLE_TEACHER, NULL, &m),
                     0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "You're invited to join Evil  Bcc: x@evil.test");
    mail_msg_free(&m);

    assert_int_equal(mail_render_invite("en", "l", "o", ROLE_OWNER, NULL, &m), DOMAIN_EINVAL);
    assert_int_equal(mail_render_invite("en", "l", "o", ROLE_NONE, NULL, &m), DOMAIN_EINVAL);
    assert_int_equal(mail_render_invite("en", NULL, "o", ROLE_COACH, NULL, &m), DOMAIN_EINVAL);
    assert_int_equal(mail_render_invite("en", "l", NULL, ROLE_COACH, NULL, &m), DOMAIN_EINVAL);
}

static void test_sessions(void **state)
{
    mail_msg_t m = {0};
    mail_session_t s = {"Carla Coach", "Tomás <T>", "Algebra & more",
                        "Monday, March 2, 2026 10:00 (America/New_York)", 45};
    (void)state;

    assert_int_equal(mail_render_session_scheduled("en", &s, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Session scheduled: “Algebra & more”");
    assert_contains(m.text, "Coach: Carla Coach\nTeacher: Tomás <T>\n");
    assert_contains(m.text, "Starts: Monday, March 2, 2026 10:00 (America/New_York)\n");
    assert_contains(m.text, "Duration: 45 minutes");
    assert_contains(m.html, "Teacher: Tomás &lt;T&gt;<br>");
    assert_contains(m.html, "“Algebra &amp; more”");
    mail_msg_free(&m);

    assert_int_equal(mail_render_session_scheduled("es", &s, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Sesión programada: “Algebra & more”");
    assert_contains(m.text, "Docente: Tomás <T>\n");
    assert_contains(m.text, "Duración: 45 minutos");
    mail_msg_free(&m);

    assert_int_equal(mail_render_session_cancelled("en", &s, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Session cancelled: “Algebra & more”");
    assert_contains(m.text, "has been cancelled");
    mail_msg_free(&m);

    s.title = NULL;
    assert_int_equal(mail_render_session_cancelled("es", &s, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Sesión cancelada: tu mentoría");
    assert_contains(m.text, "Se ha cancelado la sesión de tu mentoría.");
    assert_contains(m.text, "Estaba programada para: Monday");
    mail_msg_free(&m);

    s.start = NULL;
    assert_int_equal(mail_render_session_scheduled("en", &s, &m), DOMAIN_EINVAL);
    assert_int_equal(mail_render_session_scheduled("en", NULL, &m), DOMAIN_EINVAL);
}

static void test_account_notice(void **state)
{
    mail_msg_t m = {0};
    (void)state;

    assert_int_equal(mail_render_account_notice("en", MAIL_NOTICE_PASSWORD_CHANGED, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Your password was changed");
    assert_contains(m.text, "was just changed");
    assert_contains(m.text, "If it was not, reset your password");
    assert_contains(m.html, "<html lang=\"en\">");
    assert_contains(m.html, "&quot;Forgot password&quot;");
    assert_null(strstr(m.text, "http"));
    mail_msg_free(&m);

    assert_int_equal(mail_render_account_notice("es", MAIL_NOTICE_PASSWORD_RESET, &m), 0);
    assert_well_formed(&m);
    assert_string_equal(m.subject, "Tu contraseña se ha restablecido");
    assert_contains(m.text, "enlace de restablecimiento");
    assert_contains(m.text, "contacta con el administrador");
    assert_contains(m.html, "<html lang=\"es\">");
    mail_msg_free(&m);

    /* Every kind renders in both languages with the shared closing paragraph. */
    for (int k = 0; k < MAIL_NOTICE_COUNT; k++) {
        assert_int_equal(mail_render_account_notice("en", (mail_notice_t)k, &m), 0);
        assert_contains(m.text, "contact your organization's administrator");
        mail_msg_free(&m);
        assert_int_equal(mail_render_account_notice("es", (mail_notice_t)k, &m), 0);
        assert_contains(m.text, "administrador de tu organización");
        mail_msg_free(&m);
    }
    assert_int_equal(mail_render_account_notice("en", MAIL_NOTICE_COUNT, &m), DOMAIN_EINVAL);
    assert_int_equal(mail_render_account_notice("en", (mail_notice_t)-1, &m), DOMAIN_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_verification),   cmocka_unit_test(test_reset),
        cmocka_unit_test(test_invite),         cmocka_unit_test(test_sessions),
        cmocka_unit_test(test_account_notice),
    };
    return cmocka_run_group_tests_name("domain/mail_templates", tests, NULL, NULL);
}

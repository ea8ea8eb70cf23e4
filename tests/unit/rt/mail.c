/*
 * rt/mail: the message text (unit), SMTP delivery to tests/unit/rt/smtp_sink.py (started here
 * on a free port), failures against a closed port, .eml files in development mode, and the
 * transport check. Each loop test ends with uv_loop_close() == 0.
 */
#include "rt/mail.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include "core/config.h"
#include "rt/curlm.h"
#include "tests/unit/rt/helpers.h"

typedef struct sent_box {
    bool done;
    int calls;
    bool sync;
    char error[512];
    bool ok;
} sent_box_t;

static int in_call;

static void on_sent(const char *error, void *data)
{
    sent_box_t *b = data;

    b->calls++;
    b->done = true;
    b->sync = in_call > 0;
    b->ok = error == NULL;
    snprintf(b->error, sizeof(b->error), "%s", error ? error : "");
}

static void on_verified(bool ok, void *data)
{
    sent_box_t *b = data;

    b->calls++;
    b->done = true;
    b->sync = in_call > 0;
    b->ok = ok;
}

static void send_and_wait(const mail_envelope_t *m, sent_box_t *b)
{
    memset(b, 0, sizeof(*b));
    in_call++;
    mail_send(m, on_sent, b);
    in_call--;
    assert_true(run_until(&b->done, 20000));
    assert_false(b->sync);
    assert_int_equal(b->calls, 1);
}

/* A free TCP port with nothing listening on it. */
static int closed_port(void)
{
    struct sockaddr_in a;
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    getsockname(fd, (struct sockaddr *)&a, &l);
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static void start(void)
{
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(curlm_init(&loop), 0);
    assert_int_equal(mail_init(&loop), 0);
}

static void stop(void)
{
    mail_shutdown();
    curlm_shutdown();
    loop_finish();
}

static const char *SUBJECT = "Sesión confirmada ✓ con Ana María Pérez-González, mañana a las 10:00 "
                             "(hora de Madrid)";
static const char *TEXT = "Hola Ana,\n\nTu sesión está confirmada.\n.\n"
                          "..una línea que empieza con puntos\n"
                          "Enlace: https://app.example.com/verify?token=abc=def&x=1\n"
                          "trailing space \nfin";
static const char *HTML = "<p>Hola <b>Ana</b>, tu sesión está confirmada.</p>";

static void test_build(void **state)
{
    mail_envelope_t m = {"ana@example.com", SUBJECT, TEXT, HTML, NULL, NULL, NULL};
    char *s = mail_build(&m, "Coachd <no-reply@coachd.test>", false, 1700000000LL);
    const char *p;
    size_t linelen = 0;

    (void)state;
    assert_non_null(strstr(s, "Date: Tue, 14 Nov 2023 22:13:20 +0000\r\n"));
    assert_non_null(strstr(s, "From: Coachd <no-reply@coachd.test>\r\n"));
    assert_non_null(strstr(s, "To: ana@example.com\r\n"));
    assert_non_null(strstr(s, "Subject: =?UTF-8?B?"));
    assert_non_null(strstr(s, "@coachd.test>\r\nMIME-Version: 1.0\r\n"));
    assert_non_null(strstr(s, "Message-ID: <"));
    assert_non_null(strstr(s, "Content-Type: multipart/alternative; boundary="));
    assert_non_null(strstr(s, "Content-Type: text/html; charset=UTF-8"));
    assert_non_null(strstr(s, "Content-Transfer-Encoding: quoted-printable"));
    /* CRLF only, no line over 78 characters (the long subject is folded) */
    for (p = s; *p; p++) {
        if (*p == '\n') {
            assert_true(p > s && p[-1] == '\r');
            linelen = 0;
        } else if (*p != '\r') {
            linelen++;
            assert_true(linelen <= 78);
        }
    }
    free(s);

    /* plain ASCII: 7bit, plain subject, single part */
    mail_envelope_t a = {"bob@example.com", "Welcome", "Hi Bob\nline 2", NULL, NULL, NULL, NULL};
    s = mail_build(&a, "no-reply@coachd.test", false, 0);
    assert_non_null(strstr(s, "Subject: Welcome\r\n"));
    assert_non_null(strstr(s, "Content-Type: text/plain; charset=UTF-8\r\n"
                              "Content-Transfer-Encoding: 7bit\r\n\r\nHi Bob\r\nline 2\r\n"));
    assert_null(strstr(s, "multipart"));
    free(s);

    /* header injection through the subject is impossible */
    mail_envelope_t inj = {
        "bob@example.com", "Hi\r\nBcc: evil@example.com", "x", NULL, NULL, NULL, NULL};
    s = mail_build(&inj, "no-reply@coachd.test", false, 0);
    assert_null(strstr(s, "\r\nBcc:"));
    free(s);

    /* a given Message-ID (the outbox's, stable across retries) is used as is; one with other
     * characters than [0-9a-z.-] is replaced by a random one */
    mail_envelope_t fixed = {"bob@example.com", "Hi", "x", NULL, "0123abcd.ef-9", NULL, NULL};
    s = mail_build(&fixed, "no-reply@coachd.test", false, 0);
    assert_non_null(strstr(s, "\r\nMessage-ID: <0123abcd.ef-9@coachd.test>\r\n"));
    free(s);
    mail_envelope_t badid = {"bob@example.com", "Hi", "x", NULL, "a>\r\nBcc: e@x", NULL, NULL};
    s = mail_build(&badid, "no-reply@coachd.test", false, 0);
    assert_null(strstr(s, "\r\nBcc:"));
    assert_null(strstr(s, "<a>"));
    assert_non_null(strstr(s, "\r\nMessage-ID: <"));
    free(s);
}

static void test_smtp(void **state)
{
    char *dir = make_tmpdir(), *out = path_join(dir, "sink"), url[128];
    int port;
    pid_t pid = sink_start("smtp_sink.py", out, &port);
    mail_envelope_t m = {"ana@example.com", SUBJECT, TEXT, HTML, NULL, NULL, NULL};
    sent_box_t b;
    json_t *rec, *rcpt;
    char *want_text;
    size_t i, k;

    (void)state;
    snprintf(url, sizeof(url), "smtp://mailer:p%%40ss@127.0.0.1:%d", port);
    cfg.smtp_url = url;
    cfg.mail_from = "Coachd <no-reply@coachd.test>";
    start();
    send_and_wait(&m, &b);
    assert_string_equal(b.error, "");
    assert_true(b.ok);

    /* plain message, then a second one over the same multi handle */
    mail_envelope_t plain = {"bob@example.com", "Welcome", "Hi Bob", NULL, NULL, NULL, NULL};
    send_and_wait(&plain, &b);
    assert_true(b.ok);

    rec = sink_record(out, 0);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "mail_from")),
                        "no-reply@coachd.test");
    rcpt = json_object_get(rec, "rcpt_tos");
    assert_int_equal(json_array_size(rcpt), 1);
    assert_string_equal(json_string_value(json_array_get(rcpt, 0)), "ana@example.com");
    assert_string_equal(json_string_value(json_object_get(rec, "subject")), SUBJECT);
    /* the text part, with CRLF turned back into LF by the parser */
    want_text = strdup(TEXT);
    for (i = k = 0; want_text[i]; i++)
        want_text[k++] = want_text[i];
    want_text[k] = '\0';
    {
        const char *got = json_string_value(json_object_get(rec, "text"));
        size_t gl;

        assert_non_null(got);
        gl = strlen(got);
        if (gl > 0 && got[gl - 1] == '\n') gl--; /* the body ends with a line break */
        assert_int_equal(gl, strlen(want_text));
        assert_memory_equal(got, want_text, gl);
    }
    free(want_text);
    assert_non_null(strstr(json_string_value(json_object_get(rec, "html")), "sesión está"));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(rec, "headers"), "MIME-Version")), "1.0");
    json_decref(rec);
    rec = sink_record(out, 1);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "subject")), "Welcome");
    assert_string_equal(json_string_value(json_object_get(rec, "text")), "Hi Bob\n");
    json_decref(rec);

    /* transport check against the sink */
    memset(&b, 0, sizeof(b));
    in_call++;
    mail_verify(on_verified, &b);
    in_call--;
    assert_true(run_until(&b.done, 20000));
    assert_false(b.sync);
    assert_true(b.ok);
    stop();
    sink_stop(pid);
    cfg.smtp_url = NULL;
    rm_rf(dir);
    free(dir);
    free(out);
}

static void test_smtp_down(void **state)
{
    char url[64];
    mail_envelope_t m = {"ana@example.com", "Hi", "text", NULL, NULL, NULL, NULL};
    mail_envelope_t bad = {
        "ana@example.com\r\nRCPT TO:<x@y>", "Hi", "text", NULL, NULL, NULL, NULL};
    sent_box_t b;

    (void)state;
    snprintf(url, sizeof(url), "smtp://127.0.0.1:%d", closed_port());
    cfg.smtp_url = url;
    start();
    send_and_wait(&m, &b);
    assert_false(b.ok);
    assert_non_null(strstr(b.error, "smtp:"));
    send_and_wait(&bad, &b);
    assert_false(b.ok);
    memset(&b, 0, sizeof(b));
    mail_verify(on_verified, &b);
    assert_true(run_until(&b.done, 20000));
    assert_false(b.ok);
    stop();
    cfg.smtp_url = NULL;
}

static void test_eml(void **state)
{
    char *dir = make_tmpdir(), *mdir = path_join(dir, "a/b/mail");
    mail_envelope_t m = {"ana@example.com", SUBJECT, TEXT, HTML, NULL, NULL, NULL};
    sent_box_t b;
    DIR *d;
    struct dirent *e;
    char *text = NULL;

    (void)state;
    cfg.smtp_url = NULL;
    cfg.production = false;
    cfg.mail_dir = mdir;
    start(); /* creates the folder */
    send_and_wait(&m, &b);
    assert_true(b.ok);
    send_and_wait(&m, &b);
    assert_true(b.ok);
    assert_int_equal(count_files(mdir, ".eml"), 2);
    assert_int_equal(count_files(mdir, ".tmp"), 0);
    d = opendir(mdir);
    while ((e = readdir(d)) != NULL) {
        if (strstr(e->d_name, ".eml")) {
            char *p = path_join(mdir, e->d_name);

            free(text);
            text = read_file(p);
            free(p);
        }
    }
    closedir(d);
    assert_non_null(text);
    /* .eml files keep UTF-8 bodies readable, links intact */
    assert_non_null(strstr(text, "Content-Transfer-Encoding: 8bit"));
    assert_non_null(strstr(text, "Tu sesión está confirmada.\r\n"));
    assert_non_null(strstr(text, "https://app.example.com/verify?token=abc=def&x=1\r\n"));
    assert_non_null(strstr(text, "Subject: =?UTF-8?B?"));
    free(text);
    memset(&b, 0, sizeof(b));
    mail_verify(on_verified, &b);
    assert_true(run_until(&b.done, 5000));
    assert_true(b.ok);

    /* production without SMTP_URL: refuses */
    cfg.production = true;
    send_and_wait(&m, &b);
    assert_false(b.ok);
    cfg.production = false;
    stop();
    cfg.mail_dir = NULL;
    rm_rf(dir);
    free(dir);
    free(mdir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build),
        cmocka_unit_test(test_smtp),
        cmocka_unit_test(test_smtp_down),
        cmocka_unit_test(test_eml),
    };

    return cmocka_run_group_tests_name("rt_mail", tests, NULL, NULL);
}

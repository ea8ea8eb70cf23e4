/*
 * rt/push and rt/curlm: ticket parsing (unit), batches to tests/unit/rt/push_sink.py (started
 * here on a free port) including a DeviceNotRegistered ticket, retryable 429/503 answers, a
 * closed port, curlm_shutdown with a transfer in flight, and the development file sink (no
 * PUSH_URL: one .json file per batch under PUSH_DIR; PUSH_DIR a file, the folder removed (made
 * again) or replaced by a file, a full disk). Each loop test ends with
 * uv_loop_close() == 0.
 */
#include "rt/push.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "core/config.h"
#include "rt/curlm.h"
#include "tests/unit/rt/helpers.h"

typedef struct push_box {
    bool done;
    int calls;
    bool sync;
    bool ok, retryable;
    long status;
    int n_unregistered, n_ticket_errors;
    const char *unregistered[8];
    char error[256];
} push_box_t;

static int in_call;

static void on_pushed(const push_result_t *r, void *data)
{
    push_box_t *b = data;
    int i;

    b->calls++;
    b->done = true;
    b->sync = in_call > 0;
    b->ok = r->ok;
    b->retryable = r->retryable;
    b->status = r->http_status;
    b->n_unregistered = r->n_unregistered;
    b->n_ticket_errors = r->n_ticket_errors;
    for (i = 0; i < r->n_unregistered && i < 8; i++)
        b->unregistered[i] = r->unregistered[i];
    snprintf(b->error, sizeof(b->error), "%s", r->error ? r->error : "");
}

static void push_and_wait(const char *const *tokens, int n, const push_msg_t *m, push_box_t *b)
{
    memset(b, 0, sizeof(*b));
    in_call++;
    push_send(tokens, n, m, on_pushed, b);
    in_call--;
    assert_true(run_until(&b->done, 20000));
    assert_false(b->sync);
    assert_int_equal(b->calls, 1);
}

static void start(void)
{
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(curlm_init(&loop), 0);
}

static void stop(void)
{
    curlm_shutdown();
    loop_finish();
}

static void test_parse(void **state)
{
    const char *tokens[3] = {"A", "B", "C"};
    const char *body =
        "{\"data\":[{\"status\":\"ok\",\"id\":\"1\"},"
        "{\"status\":\"error\",\"message\":\"x\",\"details\":{\"error\":\"DeviceNotRegistered\"}},"
        "{\"status\":\"error\",\"message\":\"y\",\"details\":{\"error\":\"MessageTooBig\"}}]}";
    push_result_t r;

    (void)state;
    assert_int_equal(push_parse_tickets(body, strlen(body), tokens, 3, &r), 0);
    assert_int_equal(r.n_unregistered, 1);
    assert_ptr_equal(r.unregistered[0], tokens[1]);
    assert_int_equal(r.n_ticket_errors, 2);
    free(r.unregistered);
    assert_int_equal(push_parse_tickets("{\"errors\":[]}", 13, tokens, 3, &r), -1);
    free(r.unregistered);
    assert_int_equal(push_parse_tickets("nope", 4, tokens, 3, &r), -1);
    free(r.unregistered);
}

static void test_send(void **state)
{
    char *dir = make_tmpdir(), *out = path_join(dir, "sink"), url[128];
    int port, i;
    pid_t pid = sink_start("push_sink.py", out, &port);
    const char *tokens[3] = {"ExponentPushToken[aaa]", "ExponentPushToken[Unregistered1]",
                             "ExponentPushToken[ccc]"};
    json_t *data = json_pack("{s:s}", "mentorshipId", "m-1"), *rec, *body, *m0, *hdrs;
    push_msg_t msg = {"Ana Pérez", "¡Hola! ¿Cómo estás?", data};
    push_box_t b;

    (void)state;
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/--/api/v2/push/send", port);
    cfg.push_url = url;
    cfg.push_access_token = "secret-token";
    start();
    push_and_wait(tokens, 3, &msg, &b);
    assert_string_equal(b.error, "");
    assert_true(b.ok);
    assert_int_equal(b.status, 200);
    assert_int_equal(b.n_unregistered, 1);
    assert_ptr_equal(b.unregistered[0], tokens[1]);

    rec = sink_record(out, 0);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "path")), "/--/api/v2/push/send");
    hdrs = json_object_get(rec, "headers");
    assert_string_equal(json_string_value(json_object_get(hdrs, "authorization")),
                        "Bearer secret-token");
    assert_string_equal(json_string_value(json_object_get(hdrs, "content-type")),
                        "application/json");
    assert_string_equal(json_string_value(json_object_get(hdrs, "accept")), "application/json");
    body = json_object_get(rec, "body");
    assert_int_equal(json_array_size(body), 3);
    for (i = 0; i < 3; i++) {
        m0 = json_array_get(body, (size_t)i);
        assert_string_equal(json_string_value(json_object_get(m0, "to")), tokens[i]);
        assert_string_equal(json_string_value(json_object_get(m0, "title")), "Ana Pérez");
        assert_string_equal(json_string_value(json_object_get(m0, "body")), "¡Hola! ¿Cómo estás?");
        assert_string_equal(json_string_value(json_object_get(m0, "sound")), "default");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(m0, "data"), "mentorshipId")), "m-1");
    }
    json_decref(rec);

    /* 429 and 503: retryable failures */
    {
        const char *t429[1] = {"ExponentPushToken[Status429]"};
        const char *t503[1] = {"ExponentPushToken[Status503]"};

        push_and_wait(t429, 1, &msg, &b);
        assert_false(b.ok);
        assert_true(b.retryable);
        assert_int_equal(b.status, 429);
        push_and_wait(t503, 1, &msg, &b);
        assert_false(b.ok);
        assert_true(b.retryable);
        assert_int_equal(b.status, 503);
    }
    /* a batch over the limit is refused (from the loop), without a request */
    {
        const char *many[PUSH_BATCH_MAX + 1];

        for (i = 0; i <= PUSH_BATCH_MAX; i++)
            many[i] = "ExponentPushToken[x]";
        push_and_wait(many, PUSH_BATCH_MAX + 1, &msg, &b);
        assert_false(b.ok);
        assert_false(b.retryable);
        assert_int_equal(count_files(out, ".json"), 3);
    }
    /* no token configured: no Authorization header; no data: field left out */
    cfg.push_access_token = NULL;
    msg.data = NULL;
    push_and_wait(tokens, 1, &msg, &b);
    assert_true(b.ok);
    rec = sink_record(out, 3);
    assert_non_null(rec);
    assert_null(json_object_get(json_object_get(rec, "headers"), "authorization"));
    assert_null(json_object_get(json_array_get(json_object_get(rec, "body"), 0), "data"));
    json_decref(rec);
    stop();
    sink_stop(pid);
    json_decref(data);
    cfg.push_url = NULL;
    rm_rf(dir);
    free(dir);
    free(out);
}

/* A port that accepts connections and never answers, and one that refuses them. */
static int listen_mute(int *fd_out)
{
    struct sockaddr_in a;
    socklen_t l = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(fd, 8), 0);
    getsockname(fd, (struct sockaddr *)&a, &l);
    *fd_out = fd;
    return ntohs(a.sin_port);
}

static void test_failures(void **state)
{
    char url[128];
    const char *tokens[1] = {"ExponentPushToken[aaa]"};
    push_msg_t msg = {"t", "b", NULL};
    push_box_t b;
    int fd, port = listen_mute(&fd);

    (void)state;
    close(fd); /* now nothing listens there */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/send", port);
    cfg.push_url = url;
    start();
    push_and_wait(tokens, 1, &msg, &b);
    assert_false(b.ok);
    assert_true(b.retryable);
    assert_int_equal(b.status, 0);
    assert_non_null(strstr(b.error, "push:"));

    /* shutdown with a transfer stuck on a silent server: done fires once, with an error */
    port = listen_mute(&fd);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/send", port);
    memset(&b, 0, sizeof(b));
    push_send(tokens, 1, &msg, on_pushed, &b);
    run_for(200);
    assert_false(b.done);
    curlm_shutdown();
    assert_true(b.done);
    assert_int_equal(b.calls, 1);
    assert_false(b.ok);
    loop_finish();
    close(fd);
    cfg.push_url = NULL;
}

/* The only visible *.json file of dir, read whole (heap), or NULL. */
static char *only_json(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char *text = NULL;

    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);

        if (e->d_name[0] != '.' && l > 5 && strcmp(e->d_name + l - 5, ".json") == 0) {
            char *p = path_join(dir, e->d_name);

            text = read_file(p);
            free(p);
            break;
        }
    }
    closedir(d);
    return text;
}

static void test_file_sink(void **state)
{
    char *dir = make_tmpdir(), *out = path_join(dir, "push/deep"), *text;
    const char *tokens[2] = {"ExponentPushToken[aaa]", "ExponentPushToken[bbb]"};
    json_t *data = json_pack("{s:s}", "type", "chat-message");
    push_msg_t msg = {"Ana Pérez", "¡Hola!", data};
    push_box_t b;

    (void)state;
    cfg.push_url = NULL; /* development (cfg.production false) without PUSH_URL */
    cfg.push_dir = out;
    start();
    assert_int_equal(push_init(&loop), 0); /* creates the folder, parents included */
    push_and_wait(tokens, 2, &msg, &b);
    assert_string_equal(b.error, "");
    assert_true(b.ok);
    assert_int_equal(b.n_unregistered, 0);
    assert_int_equal(count_files(out, ".json"), 1);
    assert_int_equal(count_files(out, ".tmp"), 0);
    text = only_json(out);
    assert_non_null(text);
    /* the exact body a POST to the endpoint would carry */
    assert_string_equal(text,
                        "[{\"to\":\"ExponentPushToken[aaa]\",\"title\":\"Ana Pérez\",\"body\":"
                        "\"¡Hola!\",\"data\":{\"type\":\"chat-message\"},\"sound\":\"default\"},"
                        "{\"to\":\"ExponentPushToken[bbb]\",\"title\":\"Ana Pérez\",\"body\":"
                        "\"¡Hola!\",\"data\":{\"type\":\"chat-message\"},\"sound\":\"default\"}]");
    free(text);
    push_and_wait(tokens, 1, &msg, &b);
    assert_true(b.ok);
    assert_int_equal(count_files(out, ".json"), 2);
    /* an invalid batch writes nothing */
    push_and_wait(tokens, 0, &msg, &b);
    assert_false(b.ok);
    assert_false(b.retryable);
    assert_int_equal(count_files(out, ".json"), 2);
    /* after push_shutdown: a retryable failure, from the loop */
    push_shutdown();
    push_and_wait(tokens, 1, &msg, &b);
    assert_false(b.ok);
    assert_true(b.retryable);
    assert_int_equal(count_files(out, ".json"), 2);
    stop();
    json_decref(data);
    cfg.push_dir = NULL;
    rm_rf(dir);
    free(dir);
    free(out);
}

/* The sink's failures: each a retryable failure, no .json and no temporary file left, and the
 * folder is not taken for one when PUSH_DIR names a file. */
static void test_file_sink_failures(void **state)
{
    char *dir = make_tmpdir(), *out = path_join(dir, "push"), *file = path_join(dir, "plain");
    const char *tokens[1] = {"ExponentPushToken[aaa]"};
    push_msg_t msg = {"t", "b", NULL};
    push_box_t b;
    FILE *f;
    struct rlimit old, small;

    (void)state;
    cfg.push_url = NULL;
    start();
    /* PUSH_DIR names a regular file: push_init refuses it */
    f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    cfg.push_dir = file;
    assert_int_equal(push_init(&loop), -1);
    /* the folder disappears while the server runs (messages cleared): it is made again */
    cfg.push_dir = out;
    assert_int_equal(push_init(&loop), 0);
    rm_rf(out);
    push_and_wait(tokens, 1, &msg, &b);
    assert_string_equal(b.error, "");
    assert_true(b.ok);
    assert_int_equal(count_files(out, ".json"), 1);
    /* replaced by a file: a retryable failure */
    rm_rf(out);
    f = fopen(out, "w");
    assert_non_null(f);
    fclose(f);
    push_and_wait(tokens, 1, &msg, &b);
    assert_false(b.ok);
    assert_true(b.retryable);
    unlink(out);
    rm_rf(out);
    /* the disk is full (a file size limit: EFBIG): nothing is left behind */
    assert_int_equal(push_init(&loop), 0);
    assert_int_equal(count_files(out, ".json"), 0);
    signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &old);
    small = old;
    small.rlim_cur = 10;
    setrlimit(RLIMIT_FSIZE, &small);
    push_and_wait(tokens, 1, &msg, &b);
    setrlimit(RLIMIT_FSIZE, &old);
    assert_false(b.ok);
    assert_true(b.retryable);
    assert_int_equal(count_files(out, ".json"), 0);
    assert_int_equal(count_files(out, ".tmp"), 0);
    stop();
    cfg.push_dir = NULL;
    rm_rf(dir);
    free(dir);
    free(out);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_send),
        cmocka_unit_test(test_failures),
        cmocka_unit_test(test_file_sink),
        cmocka_unit_test(test_file_sink_failures),
    };

    return cmocka_run_group_tests_name("rt_push", tests, NULL, NULL);
}

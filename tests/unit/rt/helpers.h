/*
 * Helpers shared by the rt/ tests: a loop with a watchdog, "run until a flag is set", test
 * sinks started as child processes (they die with the test through PR_SET_PDEATHSIG), and
 * small file readers. Test code only: the blocking waits here run before or between loop runs.
 */
#pragma once
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include <cmocka.h>
#include <jansson.h>

#ifndef RT_TESTS_DIR
#define RT_TESTS_DIR "tests/unit/rt"
#endif

static uv_loop_t loop;
static bool loop_is_open;

static inline int loop_begin(void)
{
    int rc = uv_loop_init(&loop);

    loop_is_open = rc == 0;
    return rc;
}

typedef struct run_guard {
    uv_timer_t timer;
    uv_prepare_t prepare;
    volatile bool *flag;
    bool expired;
    int closing;
} run_guard_t;

static void on_guard(uv_timer_t *t)
{
    run_guard_t *g = t->data;

    g->expired = true;
    uv_stop(t->loop);
}

/* Runs before the loop would block: stop once the flag is set, whatever phase set it (a
 * UV_RUN_ONCE loop would still block after a timer callback set the flag). */
static void on_guard_prepare(uv_prepare_t *p)
{
    run_guard_t *g = p->data;

    if (*g->flag) uv_stop(p->loop);
}

static void on_guard_closed(uv_handle_t *h)
{
    run_guard_t *g = h->data;

    if (--g->closing == 0) free(g);
}

/* Runs the loop until *flag becomes true or ms pass; returns *flag. */
static inline bool run_until(volatile bool *flag, unsigned ms)
{
    run_guard_t *g = calloc(1, sizeof(*g));
    bool ok;

    g->flag = flag;
    uv_timer_init(&loop, &g->timer);
    uv_prepare_init(&loop, &g->prepare);
    g->timer.data = g->prepare.data = g;
    uv_timer_start(&g->timer, on_guard, ms, 0);
    uv_prepare_start(&g->prepare, on_guard_prepare);
    while (!*flag && !g->expired)
        uv_run(&loop, UV_RUN_DEFAULT);
    ok = *flag;
    g->closing = 2;
    uv_close((uv_handle_t *)&g->timer, on_guard_closed);
    uv_close((uv_handle_t *)&g->prepare, on_guard_closed);
    uv_run(&loop, UV_RUN_NOWAIT);
    return ok;
}

/* Runs the loop for ms milliseconds. */
static inline void run_for(unsigned ms)
{
    bool never = false;

    run_until(&never, ms);
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

/* Lets close callbacks run, then requires that no handle is left. */
static inline void loop_finish(void)
{
    int i, rc;

    for (i = 0; i < 50; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    uv_run(&loop, UV_RUN_DEFAULT);
    rc = uv_loop_close(&loop);
    loop_is_open = false;
    if (rc != 0) {
        uv_print_all_handles(&loop, stderr);
        uv_walk(&loop, close_any, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    assert_int_equal(rc, 0);
}

static inline char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/coachd-rt-XXXXXX";
    char *d = mkdtemp(tmpl);

    assert_non_null(d);
    return strdup(d ? d : "/tmp/coachd-rt-missing");
}

static inline char *path_join(const char *a, const char *b)
{
    size_t n;
    char *p;

    if (!a) a = "";
    if (!b) b = "";
    n = strlen(a) + strlen(b) + 2;
    p = malloc(n);
    snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* Starts /usr/bin/python3 SCRIPT PORT_FILE OUT_DIR and waits (up to 10 s) for its port. */
static inline pid_t sink_start(const char *script, const char *out_dir, int *port)
{
    char *port_file = path_join(out_dir, "port");
    char *script_path = path_join(RT_TESTS_DIR, script);
    pid_t parent = getpid(), pid;
    int i;

    mkdir(out_dir, 0755);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(1);
        execl("/usr/bin/python3", "python3", script_path, port_file, out_dir, (char *)NULL);
        _exit(127);
    }
    *port = 0;
    for (i = 0; i < 1000 && *port == 0; i++) {
        FILE *f = fopen(port_file, "r");
        struct timespec ts = {0, 10 * 1000 * 1000};

        if (f) {
            if (fscanf(f, "%d", port) != 1) *port = 0;
            fclose(f);
        }
        if (*port == 0) nanosleep(&ts, NULL);
    }
    free(port_file);
    free(script_path);
    if (*port == 0) fail_msg("sink %s did not start", script);
    return pid;
}

static inline void sink_stop(pid_t pid)
{
    int st;

    kill(pid, SIGTERM);
    waitpid(pid, &st, 0);
}

/* Loads OUT_DIR/<n>.json, or NULL when it does not exist. */
static inline json_t *sink_record(const char *out_dir, int n)
{
    char name[32];
    char *p;
    json_error_t err;
    json_t *j;

    snprintf(name, sizeof(name), "%d.json", n);
    p = path_join(out_dir, name);
    j = json_load_file(p, 0, &err);
    free(p);
    return j;
}

static inline int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;
    size_t sl = strlen(suffix);

    if (!d) return 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);

        if (l >= sl && strcmp(e->d_name + l - sl, suffix) == 0) n++;
    }
    closedir(d);
    return n;
}

static inline char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    long n;
    char *s;

    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    s = malloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    s[n] = '\0';
    fclose(f);
    return s;
}

static inline void rm_rf(const char *dir)
{
    char cmd[512];

    if (strncmp(dir, "/tmp/coachd-rt-", 15) != 0) return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

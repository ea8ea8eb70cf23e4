/* core/metrics: the shared slots, with real processes (fork) as workers. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/metrics.h"
#include "tests.h"

static const char *SERIES =
    "coachd_http_requests_total{method=\"GET\",route=\"/x\",status=\"200\"} ";
static const char *COUNT =
    "coachd_http_request_duration_seconds_count{method=\"GET\",route=\"/x\"} ";
static const char *INF =
    "coachd_http_request_duration_seconds_bucket{method=\"GET\",route=\"/x\",le=\"+Inf\"} ";

/* The value after `prefix` in the rendered text, -1 when absent. */
static long long find(const char *text, const char *prefix)
{
    const char *p = strstr(text, prefix);
    return p ? atoll(p + strlen(prefix)) : -1;
}

typedef struct sums {
    long long series, count, inf;
    int reporting;
    long long requests;
} sums_t;

static sums_t collect(void)
{
    metrics_view_t *v = metrics_collect();
    buf_t b = BUF_INIT;
    metrics_render_requests(&b, v);
    buf_putc(&b, '\0');
    sums_t s = {find(b.data, SERIES), find(b.data, COUNT), find(b.data, INF), 0, 0};
    for (int i = 0; i < v->nworkers; i++) {
        s.reporting += v->workers[i].reporting;
        s.requests += (long long)v->workers[i].requests;
    }
    buf_free(&b);
    metrics_view_free(v);
    return s;
}

/* A worker in slot `slot` that answers requests of /x, publishing after each, for ms
 * milliseconds (n: that many requests instead), then exits. */
static pid_t worker(int slot, int n, int ms)
{
    pid_t pid = fork();
    if (pid == 0) {
        metrics_adopt_slot(slot);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        double v[1];
        for (int i = 0; n ? i < n : 1; i++) {
            metrics_observe("GET", "/x", 200, 0.002);
            v[0] = metrics_base_values()[0] + i + 1;
            metrics_publish(v, 1);
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (!n && (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 >= ms)
                break;
        }
        _exit(0);
    }
    return pid;
}

static void reap(pid_t pid)
{
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* While two workers publish as fast as they can, every read is one whole snapshot of each: the
 * series, the histogram's count and its +Inf bucket (written one after the other) agree, and
 * the sums never go backwards. */
static void test_concurrent_reads_never_torn(void **state)
{
    (void)state;
    assert_int_equal(metrics_shm_init(3), 0);
    pid_t kids[2] = {worker(0, 0, 300), worker(1, 0, 300)};
    int alive = 2, reads = 0;
    long long last = 0;
    while (alive) {
        sums_t s = collect();
        if (s.series >= 0) {
            assert_int_equal(s.series, s.count);
            assert_int_equal(s.series, s.inf);
            assert_true(s.series >= last);
            last = s.series;
            reads++;
        }
        for (int i = 0; i < 2; i++) {
            int status;
            if (kids[i] && waitpid(kids[i], &status, WNOHANG) == kids[i]) {
                assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
                kids[i] = 0;
                alive--;
            }
        }
    }
    sums_t s = collect();
    assert_true(s.series > 1000);
    assert_int_equal(s.series, s.count);
    assert_int_equal(s.requests, s.series);
    /* The workers exited: their counts stay, their slots no longer report. */
    assert_int_equal(s.reporting, 0);
    assert_true(reads > 10);
}

/* A replacement continues the slot's counts (and the base values a caller adds to its
 * counters), so the sum over workers does not go back to 0 for Prometheus. */
static void test_replacement_continues(void **state)
{
    (void)state;
    assert_int_equal(metrics_shm_init(2), 0);
    reap(worker(1, 5, 0));
    assert_int_equal(collect().series, 5);
    reap(worker(1, 3, 0));
    sums_t s = collect();
    assert_int_equal(s.series, 8);
    assert_int_equal(s.count, 8);
    assert_int_equal(s.requests, 8);
    metrics_view_t *v = metrics_collect();
    assert_true(v->workers[1].pid > 0);
    assert_int_equal(v->workers[0].pid, 0);
    assert_true(v->workers[1].values[0] == 8); /* 5, then 5 + 3 */
    metrics_view_free(v);
}

/* A slot written by a live process reports; the reader's own slot too. */
static void test_live_worker_reports(void **state)
{
    (void)state;
    assert_int_equal(metrics_shm_init(2), 0);
    metrics_adopt_slot(0);
    metrics_observe("GET", "/x", 200, 0.5);
    metrics_observe(NULL, NULL, 400, 0.5);
    metrics_publish(NULL, 0);
    metrics_view_t *v = metrics_collect();
    assert_true(v->workers[0].reporting);
    assert_int_equal(v->workers[0].pid, getpid());
    assert_false(v->workers[1].reporting);
    buf_t b = BUF_INIT;
    metrics_render_requests(&b, v);
    buf_putc(&b, '\0');
    assert_non_null(strstr(
        b.data, "coachd_http_requests_total{method=\"-\",route=\"unmatched\",status=\"400\"} 1\n"));
    assert_int_equal(find(b.data, SERIES), 1);
    buf_free(&b);
    metrics_view_free(v);
}

int run_metrics_tests(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_concurrent_reads_never_torn),
        cmocka_unit_test(test_replacement_continues),
        cmocka_unit_test(test_live_worker_reports),
    };
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}

/*
 * libcurl multi driven by the libuv loop.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION): each socket gets a uv_poll_t
 * stored as curl's per-socket pointer (curl_multi_assign). curl's single timeout
 * (CURLMOPT_TIMERFUNCTION) maps to one uv_timer_t; a zero timeout is armed as a 0 ms timer, so
 * curl_multi_socket_action never runs from inside a curl callback. Finished transfers are
 * drained with curl_multi_info_read after every socket_action call.
 *
 * A job is bound to a callback, never to a request: whoever adds an easy handle gets done()
 * exactly once, from the loop, and then owns the handle again (it calls curl_easy_cleanup).
 * CURLOPT_PRIVATE is used by this module; callers must not set it.
 *
 * DNS: Debian's libcurl uses the threaded resolver, so name lookups stay off the loop thread.
 */
#include "rt/curlm.h"

#include <stdbool.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/mem.h"

typedef struct curlm_job curlm_job_t;
typedef struct curlm_sock curlm_sock_t;

struct curlm_job {
    CURL *easy;
    curlm_done_cb done;
    void *data;
    CURLcode fail_code;       /* for jobs failed before they reached the multi handle */
    curlm_job_t *prev, *next; /* jobs (in the multi handle) or failed (waiting for defer) */
};

struct curlm_sock {
    uv_poll_t poll;
    curl_socket_t fd;
    curlm_sock_t *prev, *next; /* socks */
};

static struct {
    uv_loop_t *loop;
    CURLM *multi;
    uv_timer_t timer; /* curl's timeout */
    uv_timer_t defer; /* fails jobs that could not be added, from the loop */
    curlm_job_t *jobs;
    curlm_job_t *failed;
    curlm_sock_t *socks;
    bool running;
} M;

static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp);
static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp);
static void on_timer(uv_timer_t *t);
static void on_defer(uv_timer_t *t);
static void on_poll(uv_poll_t *p, int status, int events);
static void on_sock_closed(uv_handle_t *h);
static void check_done(void);
static void job_link(curlm_job_t **head, curlm_job_t *j);
static void job_unlink(curlm_job_t **head, curlm_job_t *j);
static void sock_close(curlm_sock_t *cs);

static void job_link(curlm_job_t **head, curlm_job_t *j)
{
    j->prev = NULL;
    j->next = *head;
    if (*head) (*head)->prev = j;
    *head = j;
}

static void job_unlink(curlm_job_t **head, curlm_job_t *j)
{
    if (j->prev)
        j->prev->next = j->next;
    else
        *head = j->next;
    if (j->next) j->next->prev = j->prev;
    j->prev = j->next = NULL;
}

int curlm_init(uv_loop_t *loop)
{
    static bool global_done;

    if (M.running) return 0;
    if (!global_done) {
        /* Not thread-safe: runs once at start, before any other thread uses curl. */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            log_error("curl: global init failed");
            return -1;
        }
        global_done = true;
    }
    M.loop = loop;
    M.multi = curl_multi_init();
    if (!M.multi) {
        log_error("curl: multi init failed");
        return -1;
    }
    curl_multi_setopt(M.multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(M.multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(M.multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, 64L);
    uv_timer_init(loop, &M.timer);
    uv_timer_init(loop, &M.defer);
    M.jobs = M.failed = NULL;
    M.socks = NULL;
    M.running = true;
    return 0;
}

void curlm_shutdown(void)
{
    curlm_job_t *j;

    if (!M.running) return;
    M.running = false;
    /* curl must not call back into a half-torn-down module. */
    curl_multi_setopt(M.multi, CURLMOPT_SOCKETFUNCTION, NULL);
    curl_multi_setopt(M.multi, CURLMOPT_TIMERFUNCTION, NULL);
    while ((j = M.jobs) != NULL) {
        job_unlink(&M.jobs, j);
        curl_multi_remove_handle(M.multi, j->easy);
        j->done(j->easy, CURLE_ABORTED_BY_CALLBACK, 0, j->data);
        free(j);
    }
    while ((j = M.failed) != NULL) {
        job_unlink(&M.failed, j);
        j->done(j->easy, j->fail_code, 0, j->data);
        free(j);
    }
    /* Stop watching before curl closes the cached connections' sockets. */
    while (M.socks)
        sock_close(M.socks);
    curl_multi_cleanup(M.multi);
    M.multi = NULL;
    uv_close((uv_handle_t *)&M.timer, NULL);
    uv_close((uv_handle_t *)&M.defer, NULL);
}

void curlm_add(CURL *easy, curlm_done_cb done, void *data)
{
    curlm_job_t *j = xcalloc(1, sizeof(*j));
    CURLMcode mc;

    j->easy = easy;
    j->done = done;
    j->data = data;
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_PRIVATE, j);
    if (!M.running) {
        j->fail_code = CURLE_FAILED_INIT;
        goto fail;
    }
    mc = curl_multi_add_handle(M.multi, easy);
    if (mc != CURLM_OK) {
        log_error("curl: add handle: %s", curl_multi_strerror(mc));
        j->fail_code = CURLE_FAILED_INIT;
        goto fail;
    }
    job_link(&M.jobs, j);
    return;

fail:
    /* done always fires from the loop, never inside curlm_add. After shutdown there is no
     * loop to defer to: the caller learns at once. */
    if (!M.running) {
        done(easy, j->fail_code, 0, data);
        free(j);
        return;
    }
    job_link(&M.failed, j);
    uv_timer_start(&M.defer, on_defer, 0, 0);
}

void curlm_fail(CURL *easy, CURLcode code, curlm_done_cb done, void *data)
{
    curlm_job_t *j;

    if (!M.running) {
        done(easy, code, 0, data);
        return;
    }
    j = xcalloc(1, sizeof(*j));
    j->easy = easy;
    j->done = done;
    j->data = data;
    j->fail_code = code;
    job_link(&M.failed, j);
    uv_timer_start(&M.defer, on_defer, 0, 0);
}

static void on_defer(uv_timer_t *t)
{
    curlm_job_t *j;

    (void)t;
    while ((j = M.failed) != NULL) {
        job_unlink(&M.failed, j);
        j->done(j->easy, j->fail_code, 0, j->data);
        free(j);
    }
}

static int on_curl_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    curlm_sock_t *cs = socketp;
    int events = 0;

    (void)easy;
    (void)userp;
    if (what == CURL_POLL_REMOVE) {
        if (cs) sock_close(cs);
        return 0;
    }
    if (!cs) {
        cs = xcalloc(1, sizeof(*cs));
        cs->fd = s;
        if (uv_poll_init_socket(M.loop, &cs->poll, s) != 0) {
            log_error("curl: cannot poll socket %d", (int)s);
            free(cs);
            return -1;
        }
        cs->next = M.socks;
        if (M.socks) M.socks->prev = cs;
        M.socks = cs;
        curl_multi_assign(M.multi, s, cs);
    }
    if (what & CURL_POLL_IN) events |= UV_READABLE;
    if (what & CURL_POLL_OUT) events |= UV_WRITABLE;
    uv_poll_start(&cs->poll, events, on_poll);
    return 0;
}

/* Stops watching a socket curl is about to close; the memory goes in the close callback. */
static void sock_close(curlm_sock_t *cs)
{
    if (cs->prev)
        cs->prev->next = cs->next;
    else
        M.socks = cs->next;
    if (cs->next) cs->next->prev = cs->prev;
    if (M.multi) curl_multi_assign(M.multi, cs->fd, NULL);
    uv_poll_stop(&cs->poll);
    uv_close((uv_handle_t *)&cs->poll, on_sock_closed);
}

static void on_sock_closed(uv_handle_t *h)
{
    free(container_of((uv_poll_t *)h, curlm_sock_t, poll));
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    (void)userp;
    if (timeout_ms < 0) {
        uv_timer_stop(&M.timer);
        return 0;
    }
    /* A 0 ms libuv timer fires on the next loop iteration, never from here. */
    uv_timer_start(&M.timer, on_timer, (uint64_t)timeout_ms, 0);
    return 0;
}

static void on_timer(uv_timer_t *t)
{
    int running;

    (void)t;
    curl_multi_socket_action(M.multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done();
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    curlm_sock_t *cs = container_of(p, curlm_sock_t, poll);
    int flags = 0, running;

    if (status < 0) {
        flags = CURL_CSELECT_ERR;
    } else {
        if (events & UV_READABLE) flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE) flags |= CURL_CSELECT_OUT;
    }
    curl_multi_socket_action(M.multi, cs->fd, flags, &running);
    check_done();
}

/* Hands every finished transfer to its owner. done may add new transfers: that is safe here
 * because no curl call is on the stack. */
static void check_done(void)
{
    CURLMsg *msg;
    int left;

    while (M.running && (msg = curl_multi_info_read(M.multi, &left)) != NULL) {
        CURL *easy = msg->easy_handle;
        CURLcode code = msg->data.result;
        curlm_job_t *j = NULL;
        long status = 0;

        if (msg->msg != CURLMSG_DONE) continue;
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&j);
        curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
        curl_multi_remove_handle(M.multi, easy);
        if (!j) continue;
        job_unlink(&M.jobs, j);
        j->done(easy, code, status, j->data);
        free(j);
    }
}

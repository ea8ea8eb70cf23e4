/*
 * uv_queue_work bound to a request reference (see offload.h).
 *
 * At most (cores - 1, at least 1) jobs run at once and the rest wait in a FIFO here, so the loop
 * keeps a core for everything else; a job whose client left while it waited is dropped without
 * spending the CPU. Each kind of work waits in its own lane, bounded by LANE_MAX (past it the
 * request gets 503), and a free thread takes the next job from the lanes in turn, so one kind
 * cannot starve another: a first-run flood waits behind itself, not in front of sign-ins.
 */
#include "core/offload.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/mem.h"

/* Jobs that may wait per lane. first-run hashes only before the installation is set up (and
 * succeeds once): a few dozen is plenty. A calendar feed holds its rows (up to a few MB) while
 * it waits, so its lane is short: past it calendar apps get 503 and fetch again later. */
static const int LANE_MAX[OFFLOAD_KIND_COUNT] = {
    [OFFLOAD_OTHER] = 1024,   [OFFLOAD_SIGN_IN] = 1024, [OFFLOAD_SIGN_UP] = 512,
    [OFFLOAD_PASSWORD] = 256, [OFFLOAD_ACCOUNT] = 256,  [OFFLOAD_FIRST_RUN] = 32,
    [OFFLOAD_CALENDAR] = 64,
};

typedef struct offload {
    uv_work_t work;
    struct offload *next;
    http_req_t *req;
    offload_work_fn fn;
    offload_done_fn done;
    void *data;
} offload_t;

/* Pool threads run at a lower priority than the loop: on a small machine four argon2 hashes
 * would otherwise take every core from the loop and every other request would wait for them.
 * Linux applies setpriority to the calling thread when given its thread id. */
static void lower_thread_priority(void)
{
    static _Thread_local int lowered;
    if (lowered) return;
    lowered = 1;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
}

static void on_work(uv_work_t *w)
{
    offload_t *o = container_of(w, offload_t, work);
    lower_thread_priority();
    o->fn(o->data);
}

static struct lane {
    offload_t *head, *tail;
    int queued;
} lanes[OFFLOAD_KIND_COUNT];
static int running, max_running;
static int next_lane; /* round robin */

static void start_next(void);

void offload_stats(int *running_out, int *queued_out)
{
    int q = 0;
    for (int i = 0; i < OFFLOAD_KIND_COUNT; i++)
        q += lanes[i].queued;
    *running_out = running;
    *queued_out = q;
}

static void on_after_work(uv_work_t *w, int status)
{
    offload_t *o = container_of(w, offload_t, work);
    http_req_t *req = o->req;
    running--;
    if (!http_req_gone(req)) {
        if (status == 0)
            o->done(req, o->data);
        else /* cancelled (UV_ECANCELED): the request must still be answered */
            http_reply_error(req, 503, "UNAVAILABLE", "Server busy");
    }
    http_req_unref(req);
    free(o);
    start_next();
}

static void start_next(void)
{
    while (running < max_running) {
        struct lane *l = NULL;
        for (int i = 0; i < OFFLOAD_KIND_COUNT && !l; i++) {
            struct lane *c = &lanes[(next_lane + i) % OFFLOAD_KIND_COUNT];
            if (c->head) {
                l = c;
                next_lane = (next_lane + i + 1) % OFFLOAD_KIND_COUNT;
            }
        }
        if (!l) break;
        offload_t *o = l->head;
        l->head = o->next;
        if (!l->head) l->tail = NULL;
        l->queued--;
        if (http_req_gone(o->req)) {
            http_req_unref(o->req);
            free(o);
            continue;
        }
        if (uv_queue_work(http_loop(), &o->work, on_work, on_after_work) != 0) {
            http_reply_error(o->req, 503, "UNAVAILABLE", "Server busy");
            http_req_unref(o->req);
            free(o);
            continue;
        }
        running++;
    }
}

void offload_run(http_req_t *req, offload_work_fn work, offload_done_fn done, void *data)
{
    offload_run_kind(req, OFFLOAD_OTHER, work, done, data);
}

void offload_run_kind(http_req_t *req, offload_kind_t kind, offload_work_fn work,
                      offload_done_fn done, void *data)
{
    if (!max_running) {
        unsigned n = uv_available_parallelism();
        max_running = n > 1 ? (int)n - 1 : 1;
    }
    if ((unsigned)kind >= OFFLOAD_KIND_COUNT) kind = OFFLOAD_OTHER;
    struct lane *l = &lanes[kind];
    if (l->queued >= LANE_MAX[kind]) {
        http_res_header(req, "Retry-After", "1");
        http_reply_error(req, 503, "UNAVAILABLE", "Server busy");
        return;
    }
    offload_t *o = xcalloc(1, sizeof(*o));
    o->req = req;
    o->fn = work;
    o->done = done;
    o->data = data;
    http_req_ref(req);
    if (l->tail)
        l->tail->next = o;
    else
        l->head = o;
    l->tail = o;
    l->queued++;
    start_next();
}

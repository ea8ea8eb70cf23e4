/*
 * uv_queue_work bound to a request reference (see offload.h).
 *
 * At most (cores - 1, at least 1) jobs run at once and the rest wait in a FIFO here, so the loop
 * keeps a core for everything else; a job whose client left while it waited is dropped without
 * spending the CPU. The wait is bounded: past OFFLOAD_QUEUE_MAX jobs the request gets 503.
 */
#include "core/offload.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/mem.h"

#define OFFLOAD_QUEUE_MAX 4096

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

static offload_t *queue_head, *queue_tail;
static int queued, running, max_running;

static void start_next(void);

static void on_after_work(uv_work_t *w, int status)
{
    offload_t *o = container_of(w, offload_t, work);
    http_req_t *req = o->req;
    running--;
    if (status == 0 && !http_req_gone(req)) o->done(req, o->data);
    http_req_unref(req);
    free(o);
    start_next();
}

static void start_next(void)
{
    while (running < max_running && queue_head) {
        offload_t *o = queue_head;
        queue_head = o->next;
        if (!queue_head) queue_tail = NULL;
        queued--;
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
    if (!max_running) {
        unsigned n = uv_available_parallelism();
        max_running = n > 1 ? (int)n - 1 : 1;
    }
    if (queued >= OFFLOAD_QUEUE_MAX) {
        http_reply_error(req, 503, "UNAVAILABLE", "Server busy");
        return;
    }
    offload_t *o = xcalloc(1, sizeof(*o));
    o->req = req;
    o->fn = work;
    o->done = done;
    o->data = data;
    http_req_ref(req);
    if (queue_tail)
        queue_tail->next = o;
    else
        queue_head = o;
    queue_tail = o;
    queued++;
    start_next();
}

/* uv_queue_work bound to a request reference (see offload.h). */
#include "core/offload.h"

#include <stdlib.h>

#include "core/mem.h"

typedef struct offload {
    uv_work_t work;
    http_req_t *req;
    offload_work_fn fn;
    offload_done_fn done;
    void *data;
} offload_t;

static void on_work(uv_work_t *w)
{
    offload_t *o = container_of(w, offload_t, work);
    o->fn(o->data);
}

static void on_after_work(uv_work_t *w, int status)
{
    offload_t *o = container_of(w, offload_t, work);
    http_req_t *req = o->req;
    if (status == 0 && !http_req_gone(req)) o->done(req, o->data);
    http_req_unref(req);
    free(o);
}

void offload_run(http_req_t *req, offload_work_fn work, offload_done_fn done, void *data)
{
    offload_t *o = xcalloc(1, sizeof(*o));
    o->req = req;
    o->fn = work;
    o->done = done;
    o->data = data;
    http_req_ref(req);
    int rc = uv_queue_work(http_loop(), &o->work, on_work, on_after_work);
    if (rc != 0) {
        http_req_unref(req);
        free(o);
        http_reply_error(req, 503, "UNAVAILABLE", "Server busy");
    }
}

/* Storage reachability for /api/health (see storage_probe.h): a real round trip through the
 * configured driver (rt/storage.h storage_check). */
#include "rt/storage_probe.h"

#include <stdlib.h>

#include "core/log.h"
#include "core/mem.h"
#include "rt/storage.h"

typedef struct probe {
    void (*cb)(bool ok, void *data);
    void *data;
} probe_t;

static void on_checked(int rc, void *data)
{
    probe_t *p = data;
    if (rc != 0) log_warn("health: storage probe failed (%d)", rc);
    p->cb(rc == 0, p->data);
    free(p);
}

void storage_probe(void (*cb)(bool ok, void *data), void *data)
{
    probe_t *p = xcalloc(1, sizeof(*p));
    p->cb = cb;
    p->data = data;
    storage_check(on_checked, p);
}

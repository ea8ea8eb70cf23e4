/* Coalescing one-row statements into one statement with array parameters (coalesce.h). */
#include "db/coalesce.h"

#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/log.h"
#include "core/mem.h"

#define SLOTS_DEFAULT 64

typedef struct caller {
    struct caller *next;
    db_coalesce_cb cb;
    void *data;
    const char *params[]; /* opts.nparams */
} caller_t;

/* One key: its waiting callers and its statements in flight. */
typedef struct entry {
    struct entry *next;      /* in its bucket */
    struct entry *turn_next; /* in the list of keys to send at the end of this turn */
    caller_t *head, *tail;   /* waiting, oldest first */
    int nwaiting, inflight;
    bool listed; /* on the turn list */
    char key[];
} entry_t;

/* One statement in flight. */
typedef struct batch {
    db_coalesce_t *c;
    entry_t *e; /* NULL: a caller sent again alone */
    int n;
    caller_t *items[];
} batch_t;

struct db_coalesce {
    db_coalesce_opts_t o;
    entry_t **slots;
    entry_t *turn; /* keys with callers to send at the end of this turn */
    uv_check_t check;
    uv_idle_t idle; /* active with check: the loop does not wait in poll before the check */
    bool check_init;
    int closing; /* handles still closing in db_coalesce_free */
    int inflight, waiting;
};

/* ---- keys ---- */

static size_t slot_of(const db_coalesce_t *c, const char *key)
{
    return fnv1a(key) % (uint32_t)c->o.slots;
}

static entry_t *entry_get(db_coalesce_t *c, const char *key)
{
    entry_t **b = &c->slots[slot_of(c, key)];
    for (entry_t *e = *b; e; e = e->next)
        if (strcmp(e->key, key) == 0) return e;
    size_t n = strlen(key);
    entry_t *e = xcalloc(1, sizeof(*e) + n + 1);
    memcpy(e->key, key, n + 1);
    e->next = *b;
    *b = e;
    return e;
}

/* Frees the key's entry once nothing of it waits or is in flight. */
static void entry_release(db_coalesce_t *c, entry_t *e)
{
    if (e->head || e->inflight || e->listed) return;
    for (entry_t **p = &c->slots[slot_of(c, e->key)]; *p; p = &(*p)->next)
        if (*p == e) {
            *p = e->next;
            break;
        }
    free(e);
}

/* ---- array literals ---- */

typedef struct str {
    char *p;
    size_t len, cap;
} str_t;

static void str_put(str_t *s, const char *d, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->p = xrealloc(s->p, s->cap);
    }
    memcpy(s->p + s->len, d, n);
    s->len += n;
    s->p[s->len] = '\0';
}

/* One element of a PostgreSQL array literal: NULL, or the text double-quoted. */
static void str_elem(str_t *s, const char *v, bool first)
{
    if (!first) str_put(s, ",", 1);
    if (!v) {
        str_put(s, "NULL", 4);
        return;
    }
    str_put(s, "\"", 1);
    for (const char *q = v; *q;) {
        size_t run = strcspn(q, "\"\\");
        str_put(s, q, run);
        q += run;
        if (*q) {
            str_put(s, "\\", 1);
            str_put(s, q, 1);
            q++;
        }
    }
    str_put(s, "\"", 1);
}

/* ---- sending ---- */

static void on_result(db_result_t *r, void *data);

static void batch_send(db_coalesce_t *c, batch_t *b)
{
    int np = c->o.nparams;
    str_t *arr = xcalloc((size_t)np, sizeof(*arr));
    const char **values = xcalloc((size_t)np, sizeof(*values));
    for (int k = 0; k < np; k++) {
        str_put(&arr[k], "{", 1);
        for (int i = 0; i < b->n; i++)
            str_elem(&arr[k], b->items[i]->params[k], i == 0);
        str_put(&arr[k], "}", 1);
        values[k] = arr[k].p;
    }
    c->inflight++;
    if (b->e) b->e->inflight++;
    if (c->o.first)
        db_query_first(c->o.sql, np, values, on_result, b);
    else
        db_query(c->o.sql, np, values, on_result, b);
    for (int k = 0; k < np; k++)
        free(arr[k].p);
    free(arr);
    free(values);
}

/* Sends the key's waiting callers (up to batch_max) as one statement. check_gone: leave out
 * callers that no longer want an answer (not when sending from db_coalesce_add, whose callback
 * must not run inside the call). */
static void entry_send(db_coalesce_t *c, entry_t *e, bool check_gone)
{
    batch_t *b = xcalloc(1, sizeof(*b) + (size_t)c->o.batch_max * sizeof(caller_t *));
    b->c = c;
    b->e = e;
    while (e->head && b->n < c->o.batch_max) {
        caller_t *k = e->head;
        e->head = k->next;
        if (!e->head) e->tail = NULL;
        e->nwaiting--;
        c->waiting--;
        k->next = NULL;
        if (check_gone && c->o.gone && c->o.gone(k->data)) {
            k->cb(NULL, -1, k->data);
            free(k);
            continue;
        }
        b->items[b->n++] = k;
    }
    if (b->n == 0) {
        free(b);
        return;
    }
    batch_send(c, b);
}

/* The key's waiting callers, in statements of up to batch_max: all of them (TURN), or as many
 * statements as the key may still have in flight (INFLIGHT; the rest wait for one to come
 * back). */
static void entry_send_waiting(db_coalesce_t *c, entry_t *e, bool check_gone)
{
    while (e->head && (c->o.mode == DB_COALESCE_TURN || e->inflight < c->o.inflight_max))
        entry_send(c, e, check_gone);
}

/* Sends k alone (a retry), after answering with r == NULL those at the head of its chain that no
 * longer want an answer, as a group's sending does. */
static void send_alone(db_coalesce_t *c, caller_t *k)
{
    while (k && c->o.gone && c->o.gone(k->data)) {
        caller_t *next = k->next;
        k->cb(NULL, -1, k->data);
        free(k);
        k = next;
    }
    if (!k) return;
    batch_t *b = xcalloc(1, sizeof(*b) + sizeof(caller_t *));
    b->c = c;
    b->items[b->n++] = k;
    batch_send(c, b);
}

static void turn_list_or_send(db_coalesce_t *c, entry_t *e, bool check_gone);

/* What follows a statement of the key: in DB_COALESCE_INFLIGHT the callers that waited go at
 * the end of this turn, with those that the turn adds (the callers of one statement that came
 * back often add their next step together: one group, not a lone first and the rest). */
static void entry_after(db_coalesce_t *c, entry_t *e)
{
    e->inflight--;
    if (c->o.mode == DB_COALESCE_INFLIGHT && e->head) turn_list_or_send(c, e, true);
    entry_release(c, e);
}

static void on_result(db_result_t *r, void *data)
{
    batch_t *b = data;
    db_coalesce_t *c = b->c;
    c->inflight--;
    /* The key's next statement leaves before this one's callers are handled. */
    if (b->e) entry_after(c, b->e);
    if (!r->ok && !r->conn_lost && c->o.retry_alone && b->n > 1) {
        log_warn("db: a coalesced statement of %d callers failed (%s %s), each is sent alone", b->n,
                 r->sqlstate ? r->sqlstate : "-", r->error ? r->error : "");
        /* One after another, each when the previous answered: sent together, a statement
         * queued at the head (opts.first) would overtake the ones queued before it, and the
         * callers would run in the reverse of their order. */
        for (int i = 0; i + 1 < b->n; i++)
            b->items[i]->next = b->items[i + 1];
        send_alone(c, b->items[0]);
        free(b);
        return;
    }
    int *rows = xmalloc((size_t)b->n * sizeof(*rows));
    for (int i = 0; i < b->n; i++)
        rows[i] = -1;
    if (r->ok) {
        for (int k = 0; k < db_nrows(r); k++) {
            long long ord = db_getll(r, k, c->o.ord_col, 0);
            if (ord >= 1 && ord <= b->n && rows[ord - 1] < 0) rows[ord - 1] = k;
        }
    }
    if (c->o.deliver_begin) c->o.deliver_begin();
    caller_t *retry_next = NULL; /* a caller sent again alone: the next of its group */
    for (int i = 0; i < b->n; i++) {
        caller_t *k = b->items[i];
        if (!b->e) retry_next = k->next;
        k->cb(r, rows[i], k->data);
        free(k);
    }
    if (c->o.deliver_end) c->o.deliver_end();
    free(rows);
    free(b);
    if (retry_next) send_alone(c, retry_next);
}

/* ---- the loop turn ---- */

static void on_check(uv_check_t *h)
{
    db_coalesce_t *c = h->data;
    uv_check_stop(h);
    uv_idle_stop(&c->idle);
    entry_t *list = c->turn;
    c->turn = NULL;
    while (list) {
        entry_t *e = list;
        list = e->turn_next;
        e->turn_next = NULL;
        e->listed = false;
        entry_send_waiting(c, e, true);
        entry_release(c, e);
    }
}

static void on_idle(uv_idle_t *h)
{
    (void)h;
}

/* Puts the key on the list sent at the end of this loop turn (on_check, after the turn's I/O
 * callbacks). The idle handle keeps the loop from waiting in poll first, so a caller added
 * outside the I/O phase (a timer, another check) does not wait for the next event. */
static void turn_list(db_coalesce_t *c, entry_t *e)
{
    if (!e->listed) {
        e->listed = true;
        e->turn_next = c->turn;
        c->turn = e;
    }
    if (!c->check_init) {
        uv_check_init(db_loop(), &c->check);
        uv_idle_init(db_loop(), &c->idle);
        /* They never keep the loop alive by themselves. */
        uv_unref((uv_handle_t *)&c->check);
        uv_unref((uv_handle_t *)&c->idle);
        c->check.data = c;
        c->idle.data = c;
        c->check_init = true;
    }
    if (!uv_is_active((uv_handle_t *)&c->check)) {
        uv_check_start(&c->check, on_check);
        uv_idle_start(&c->idle, on_idle);
    }
}

/* turn_list, or, once db_shutdown began, the key's callers go now (and fail): nothing would run
 * the check any more (main.c closes every handle right after db_shutdown, and the check never
 * keeps the loop alive), and db_shutdown delivers what fails inside it before it returns. */
static void turn_list_or_send(db_coalesce_t *c, entry_t *e, bool check_gone)
{
    if (db_running()) {
        turn_list(c, e);
        return;
    }
    entry_send_waiting(c, e, check_gone);
}

/* ---- API ---- */

db_coalesce_t *db_coalesce_new(const db_coalesce_opts_t *opts)
{
    db_coalesce_t *c = xcalloc(1, sizeof(*c));
    c->o = *opts;
    if (c->o.slots <= 0) c->o.slots = SLOTS_DEFAULT;
    if (c->o.batch_max < 1) c->o.batch_max = 1;
    if (c->o.inflight_max < 1) c->o.inflight_max = 1;
    c->slots = xcalloc((size_t)c->o.slots, sizeof(*c->slots));
    return c;
}

void db_coalesce_add(db_coalesce_t *c, const char *key, const char *const *params,
                     db_coalesce_cb cb, void *data)
{
    caller_t *k = xcalloc(1, sizeof(*k) + (size_t)c->o.nparams * sizeof(char *));
    k->cb = cb;
    k->data = data;
    for (int i = 0; i < c->o.nparams; i++)
        k->params[i] = params[i];
    entry_t *e = entry_get(c, key ? key : "");
    if (e->tail)
        e->tail->next = k;
    else
        e->head = k;
    e->tail = k;
    e->nwaiting++;
    c->waiting++;
    bool may_send = c->o.mode == DB_COALESCE_TURN || e->inflight < c->o.inflight_max;
    if (!may_send) return; /* INFLIGHT: it goes when a statement of its key comes back */
    if (e->nwaiting >= c->o.batch_max) {
        entry_send(c, e, false); /* a full group goes at once */
        return;
    }
    turn_list_or_send(c, e, false);
}

int db_coalesce_inflight(const db_coalesce_t *c)
{
    return c->inflight;
}

int db_coalesce_waiting(const db_coalesce_t *c)
{
    return c->waiting;
}

/* The coalescer goes once both of its handles are closed (in whichever order libuv ends them). */
static void on_closed(uv_handle_t *h)
{
    db_coalesce_t *c = h->data;
    if (--c->closing == 0) free(c);
}

void db_coalesce_free(db_coalesce_t *c)
{
    if (!c) return;
    for (int i = 0; i < c->o.slots; i++)
        while (c->slots[i]) {
            entry_t *e = c->slots[i];
            c->slots[i] = e->next;
            while (e->head) {
                caller_t *k = e->head;
                e->head = k->next;
                free(k);
            }
            free(e);
        }
    free(c->slots);
    if (c->check_init) {
        c->closing = 2;
        uv_close((uv_handle_t *)&c->check, on_closed);
        uv_close((uv_handle_t *)&c->idle, on_closed);
        return;
    }
    free(c);
}

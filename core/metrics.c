/*
 * Request counters and latency histograms of every worker (core/metrics.h).
 *
 * A worker counts on its loop in fixed tables (single-threaded, no locking): names (methods and
 * route patterns) are interned once, a series is (method, pattern, status) by index. The tables
 * have the shared slot's capacity, so a publish is a copy; a request no table can take any more
 * is counted as overflow, never dropped silently. The route table bounds the names (a few
 * hundred series in practice), far below the capacities.
 */
#include "core/metrics.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/log.h"
#include "core/mem.h"

static const double BUCKETS[] = {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
#define NBUCKETS (sizeof(BUCKETS) / sizeof(BUCKETS[0]))

#define NAME_LEN 128  /* a name's bytes with its NUL; longer ones are cut (route patterns: ~60) */
#define MAX_NAMES 256 /* methods and route patterns of one worker */
#define MAX_SERIES 1024
#define MAX_HISTS 512
/* A slot's readers retry this often when its owner publishes meanwhile. */
#define READ_ATTEMPTS 64

typedef struct series {
    uint16_t method, pattern; /* indices into the names */
    int32_t status;
    uint64_t count;
} series_t;

typedef struct hist {
    uint16_t method, pattern;
    uint32_t unused;
    uint64_t buckets[NBUCKETS]; /* per bucket here, cumulative when rendered */
    uint64_t count;
    double sum;
} hist_t;

/* One worker's figures as published. Everything is fixed-size, so a slot never points into a
 * worker's memory and a reader copies at most sizeof(snapshot_t). */
typedef struct snapshot {
    int64_t pid; /* 0: never published */
    uint64_t published_ns;
    uint64_t overflow;
    uint64_t requests; /* every request answered, in the tables or not */
    uint32_t nnames, nseries, nhists, nvalues;
    double values[METRICS_MAX_VALUES];
    series_t series[MAX_SERIES];
    hist_t hists[MAX_HISTS];
    char names[MAX_NAMES][NAME_LEN];
} snapshot_t;

/* seq is odd while the owner writes the buffer, and moves on with every write: a reader whose
 * copy began and ended with the same even seq has a whole snapshot. */
typedef struct snapbuf {
    _Atomic uint64_t seq;
    snapshot_t snap;
} snapbuf_t;

/* The owner writes the buffer that is not `current`, then makes it current: the last whole
 * snapshot stays readable even when the owner dies in the middle of a write. */
typedef struct slot {
    _Atomic uint32_t current;
    snapbuf_t buf[2];
} slot_t;

unsigned long metrics_worker_restarts;

static slot_t *slots; /* shared mapping, nslots long */
static int nslots;
static int my_slot = -1;

/* This worker's counts (the loop's alone). */
static const char *names[MAX_NAMES]; /* static strings, or copies adopted from the slot */
static bool name_owned[MAX_NAMES];
static size_t nnames;
static series_t series[MAX_SERIES];
static size_t nseries;
static hist_t hists[MAX_HISTS];
static size_t nhists;
static uint64_t overflow, requests;
static double base_values[METRICS_MAX_VALUES];

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Each slot's last whole snapshot as this process read it, used when a read finds the owner
 * writing through every attempt: leaving the slot out would make the sums go backwards for one
 * scrape (a counter reset to Prometheus). Collections run on the thread pool, one at a time. */
static snapshot_t **last_read; /* n_last_read long */
static int n_last_read;
static snapshot_t *spare;
static pthread_mutex_t collect_lock = PTHREAD_MUTEX_INITIALIZER;

int metrics_shm_init(int n)
{
    size_t size;
    if (n < 1 || n > METRICS_MAX_SLOTS || !size_mul((size_t)n, sizeof(slot_t), &size)) {
        log_error("metrics: %d worker slots are not possible", n);
        return -1;
    }
    /* Anonymous and shared: the workers forked after this see the same pages, and nothing
     * outside the process group can. Pages never written cost no memory. */
    void *p =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        log_error("metrics: shared memory for %d workers: %s", n, strerror(errno));
        return -1;
    }
    slots = p;
    nslots = n;
    if (last_read) { /* a new mapping (tests make several): nothing read from the old one holds */
        for (int i = 0; i < n_last_read; i++)
            free(last_read[i]);
        free(last_read);
        last_read = NULL;
    }
    return 0;
}

/* Copies the slot's last whole snapshot into out: false when its owner kept writing through
 * every attempt. Bounds are checked here, so the copy is safe to use whatever the slot held. */
static bool read_slot(slot_t *sl, snapshot_t *out)
{
    for (int attempt = 0; attempt < READ_ATTEMPTS; attempt++) {
        uint32_t cur = atomic_load_explicit(&sl->current, memory_order_acquire) & 1;
        snapbuf_t *b = &sl->buf[cur];
        uint64_t s1 = atomic_load_explicit(&b->seq, memory_order_acquire);
        if (s1 & 1) continue;
        if (s1 == 0) {
            out->pid = 0; /* never written */
            out->nnames = out->nseries = out->nhists = out->nvalues = 0;
            out->overflow = out->requests = 0;
            return true;
        }
        memcpy(out, &b->snap, offsetof(snapshot_t, series));
        if (out->nnames > MAX_NAMES) out->nnames = MAX_NAMES;
        if (out->nseries > MAX_SERIES) out->nseries = MAX_SERIES;
        if (out->nhists > MAX_HISTS) out->nhists = MAX_HISTS;
        if (out->nvalues > METRICS_MAX_VALUES) out->nvalues = METRICS_MAX_VALUES;
        memcpy(out->series, b->snap.series, out->nseries * sizeof(series_t));
        memcpy(out->hists, b->snap.hists, out->nhists * sizeof(hist_t));
        memcpy(out->names, b->snap.names, out->nnames * sizeof(out->names[0]));
        atomic_thread_fence(memory_order_acquire);
        if (atomic_load_explicit(&b->seq, memory_order_relaxed) != s1) continue;
        for (uint32_t i = 0; i < out->nnames; i++)
            out->names[i][NAME_LEN - 1] = '\0';
        /* A whole snapshot has valid indices; a slot is shared memory, so trust nothing. */
        uint32_t k = 0;
        for (uint32_t i = 0; i < out->nseries; i++)
            if (out->series[i].method < out->nnames && out->series[i].pattern < out->nnames)
                out->series[k++] = out->series[i];
        out->nseries = k;
        k = 0;
        for (uint32_t i = 0; i < out->nhists; i++)
            if (out->hists[i].method < out->nnames && out->hists[i].pattern < out->nnames)
                out->hists[k++] = out->hists[i];
        out->nhists = k;
        return true;
    }
    return false;
}

void metrics_adopt_slot(int slot)
{
    if (!slots || slot < 0 || slot >= nslots) return;
    my_slot = slot;
    /* Whatever the fork copied from the parent is not this slot's. */
    for (size_t i = 0; i < nnames; i++)
        if (name_owned[i]) free((char *)names[i]);
    nnames = nseries = nhists = 0;
    overflow = requests = 0;
    memset(base_values, 0, sizeof(base_values));
    snapshot_t *s = xmalloc(sizeof(*s));
    if (read_slot(&slots[slot], s) && s->pid != 0) {
        for (uint32_t i = 0; i < s->nnames; i++) {
            names[i] = xstrdup(s->names[i]);
            name_owned[i] = true;
        }
        nnames = s->nnames;
        memcpy(series, s->series, s->nseries * sizeof(series_t));
        nseries = s->nseries;
        memcpy(hists, s->hists, s->nhists * sizeof(hist_t));
        nhists = s->nhists;
        overflow = s->overflow;
        requests = s->requests;
        memcpy(base_values, s->values, s->nvalues * sizeof(double));
    }
    free(s);
}

const double *metrics_base_values(void)
{
    return base_values;
}

/* The index of name s, added when new; -1 when the table is full. Pointers compare first: the
 * parser's method names and the route table's patterns are static strings. */
static int intern(const char *s)
{
    for (size_t i = 0; i < nnames; i++)
        if (names[i] == s) return (int)i;
    for (size_t i = 0; i < nnames; i++) {
        if (strcmp(names[i], s) != 0) continue;
        if (name_owned[i]) { /* adopted copy: the static string is compared faster next time */
            free((char *)names[i]);
            names[i] = s;
            name_owned[i] = false;
        }
        return (int)i;
    }
    if (nnames == MAX_NAMES) return -1;
    names[nnames] = s;
    name_owned[nnames] = false;
    return (int)nnames++;
}

void metrics_observe(const char *method, const char *pattern, int status, double seconds)
{
    requests++;
    int m = intern(method ? method : "-");
    int p = intern(pattern ? pattern : "unmatched");
    if (m < 0 || p < 0) {
        overflow++;
        return;
    }
    series_t *s = NULL;
    for (size_t i = 0; i < nseries; i++) {
        if (series[i].status == status && series[i].pattern == p && series[i].method == m) {
            s = &series[i];
            break;
        }
    }
    if (!s && nseries < MAX_SERIES) {
        s = &series[nseries++];
        *s = (series_t){(uint16_t)m, (uint16_t)p, status, 0};
    }
    hist_t *h = NULL;
    for (size_t i = 0; i < nhists; i++) {
        if (hists[i].pattern == p && hists[i].method == m) {
            h = &hists[i];
            break;
        }
    }
    if (!h && nhists < MAX_HISTS) {
        h = &hists[nhists++];
        memset(h, 0, sizeof(*h));
        h->method = (uint16_t)m;
        h->pattern = (uint16_t)p;
    }
    if (!s || !h) overflow++;
    if (s) s->count++;
    if (!h) return;
    for (size_t i = 0; i < NBUCKETS; i++) {
        if (seconds <= BUCKETS[i]) {
            h->buckets[i]++;
            break;
        }
    }
    h->count++;
    h->sum += seconds;
}

void metrics_publish(const double *values, int n)
{
    if (!slots && metrics_shm_init(1) != 0) return;
    if (my_slot < 0) my_slot = 0;
    slot_t *sl = &slots[my_slot];
    uint32_t w = (atomic_load_explicit(&sl->current, memory_order_relaxed) & 1) ^ 1;
    snapbuf_t *b = &sl->buf[w];
    /* Even first: a previous owner killed in the middle of a write left it odd. */
    uint64_t seq = (atomic_load_explicit(&b->seq, memory_order_relaxed) + 1) & ~(uint64_t)1;
    atomic_store_explicit(&b->seq, seq + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    snapshot_t *s = &b->snap;
    s->pid = getpid();
    s->published_ns = now_ns();
    s->overflow = overflow;
    s->requests = requests;
    if (n < 0) n = 0;
    if (n > METRICS_MAX_VALUES) n = METRICS_MAX_VALUES;
    s->nvalues = (uint32_t)n;
    if (n) memcpy(s->values, values, (size_t)n * sizeof(double));
    s->nnames = (uint32_t)nnames;
    for (size_t i = 0; i < nnames; i++) {
        size_t len = strnlen(names[i], NAME_LEN - 1);
        memcpy(s->names[i], names[i], len);
        s->names[i][len] = '\0';
    }
    s->nseries = (uint32_t)nseries;
    memcpy(s->series, series, nseries * sizeof(series_t));
    s->nhists = (uint32_t)nhists;
    memcpy(s->hists, hists, nhists * sizeof(hist_t));
    atomic_store_explicit(&b->seq, seq + 2, memory_order_release);
    atomic_store_explicit(&sl->current, w, memory_order_release);
}

/* ---- reading every slot ---- */

/* Open-addressing index from a 64-bit key to a position in one of the merged arrays. Names are
 * keyed by their hash (a match is confirmed by comparing the strings), series by their exact
 * key. */
typedef struct itab {
    uint64_t *keys;
    uint32_t *vals; /* position + 1; 0: empty */
    size_t cap, n;
} itab_t;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void itab_put(itab_t *t, uint64_t key, uint32_t pos);

static void itab_grow(itab_t *t)
{
    itab_t old = *t;
    size_t cap;
    size_t bytes;
    if (!size_mul(old.cap ? old.cap : 32, 2, &cap) || !size_mul(cap, sizeof(uint64_t), &bytes))
        xoverflow("metrics index");
    t->keys = xcalloc(cap, sizeof(uint64_t));
    t->vals = xcalloc(cap, sizeof(uint32_t));
    t->cap = cap;
    t->n = 0;
    for (size_t i = 0; i < old.cap; i++)
        if (old.vals[i]) itab_put(t, old.keys[i], old.vals[i] - 1);
    free(old.keys);
    free(old.vals);
}

static void itab_put(itab_t *t, uint64_t key, uint32_t pos)
{
    if ((t->n + 1) * 2 > t->cap) itab_grow(t);
    size_t i = mix(key) & (t->cap - 1);
    while (t->vals[i])
        i = (i + 1) & (t->cap - 1);
    t->keys[i] = key;
    t->vals[i] = pos + 1;
    t->n++;
}

/* Positions stored under key, one after the other: *cursor starts at 0; -1 at the end. */
static long itab_next(const itab_t *t, uint64_t key, size_t *cursor)
{
    if (!t->cap) return -1;
    size_t i = (mix(key) + *cursor) & (t->cap - 1);
    while (*cursor < t->cap && t->vals[i]) {
        (*cursor)++;
        if (t->keys[i] == key) return (long)t->vals[i] - 1;
        i = (i + 1) & (t->cap - 1);
    }
    return -1;
}

typedef struct msum {
    uint32_t method, pattern; /* merged name indices */
    int32_t status;
    uint64_t count;
} msum_t;

typedef struct mhist {
    uint32_t method, pattern;
    uint64_t buckets[NBUCKETS];
    uint64_t count;
    double sum;
} mhist_t;

struct metrics_merged {
    char **names;
    size_t nnames, capnames;
    itab_t name_ix;
    msum_t *series;
    size_t nseries, capseries;
    itab_t series_ix;
    mhist_t *hists;
    size_t nhists, caphists;
    itab_t hist_ix;
};

static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* Grows an array of `size`-byte elements to hold one more. */
static void *grow(void *a, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) return a;
    size_t c, bytes;
    if (!size_mul(*cap ? *cap : 64, 2, &c) || !size_mul(c, size, &bytes))
        xoverflow("metrics merge");
    *cap = c;
    return xrealloc(a, bytes);
}

static uint32_t merged_name(struct metrics_merged *m, const char *s)
{
    uint64_t h = fnv(s);
    size_t cur = 0;
    long pos;
    while ((pos = itab_next(&m->name_ix, h, &cur)) >= 0)
        if (strcmp(m->names[pos], s) == 0) return (uint32_t)pos;
    m->names = grow(m->names, &m->capnames, m->nnames, sizeof(char *));
    m->names[m->nnames] = xstrdup(s);
    itab_put(&m->name_ix, h, (uint32_t)m->nnames);
    return (uint32_t)m->nnames++;
}

/* Merged name indices are below METRICS_MAX_SLOTS * MAX_NAMES = 2^16, and statuses take the
 * low 32 bits: the key is exact. */
static uint64_t series_key(uint32_t method, uint32_t pattern, int32_t status)
{
    return (uint64_t)method << 48 | (uint64_t)pattern << 32 | (uint32_t)status;
}

static void merge(struct metrics_merged *m, const snapshot_t *s)
{
    uint32_t map[MAX_NAMES];
    for (uint32_t i = 0; i < s->nnames; i++)
        map[i] = merged_name(m, s->names[i]);
    for (uint32_t i = 0; i < s->nseries; i++) {
        const series_t *x = &s->series[i];
        uint32_t mm = map[x->method], mp = map[x->pattern];
        uint64_t key = series_key(mm, mp, x->status);
        size_t cur = 0;
        long pos = itab_next(&m->series_ix, key, &cur);
        if (pos < 0) {
            m->series = grow(m->series, &m->capseries, m->nseries, sizeof(msum_t));
            pos = (long)m->nseries++;
            m->series[pos] = (msum_t){mm, mp, x->status, 0};
            itab_put(&m->series_ix, key, (uint32_t)pos);
        }
        m->series[pos].count += x->count;
    }
    for (uint32_t i = 0; i < s->nhists; i++) {
        const hist_t *x = &s->hists[i];
        uint32_t mm = map[x->method], mp = map[x->pattern];
        uint64_t key = series_key(mm, mp, 0);
        size_t cur = 0;
        long pos = itab_next(&m->hist_ix, key, &cur);
        if (pos < 0) {
            m->hists = grow(m->hists, &m->caphists, m->nhists, sizeof(mhist_t));
            pos = (long)m->nhists++;
            memset(&m->hists[pos], 0, sizeof(mhist_t));
            m->hists[pos].method = mm;
            m->hists[pos].pattern = mp;
            itab_put(&m->hist_ix, key, (uint32_t)pos);
        }
        mhist_t *h = &m->hists[pos];
        for (size_t k = 0; k < NBUCKETS; k++)
            h->buckets[k] += x->buckets[k];
        h->count += x->count;
        h->sum += x->sum;
    }
}

static bool process_alive(long pid)
{
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

/* The slot's snapshot for this collection: a fresh whole one, else the last one read, else NULL. */
static const snapshot_t *slot_snapshot(int i)
{
    if (!spare) spare = xmalloc(sizeof(*spare));
    if (read_slot(&slots[i], spare)) {
        snapshot_t *fresh = spare;
        spare = last_read[i];
        last_read[i] = fresh;
    }
    return last_read[i];
}

metrics_view_t *metrics_collect(void)
{
    metrics_view_t *v = xcalloc(1, sizeof(*v));
    v->merged = xcalloc(1, sizeof(*v->merged));
    if (!slots) return v;
    v->nworkers = nslots;
    v->workers = xcalloc((size_t)nslots, sizeof(metrics_worker_t));
    pthread_mutex_lock(&collect_lock);
    if (!last_read) {
        last_read = xcalloc((size_t)nslots, sizeof(*last_read));
        n_last_read = nslots;
    }
    uint64_t now = now_ns();
    for (int i = 0; i < nslots; i++) {
        metrics_worker_t *w = &v->workers[i];
        w->slot = i;
        const snapshot_t *s = slot_snapshot(i);
        if (!s || s->pid == 0) continue;
        w->pid = (long)s->pid;
        w->requests = s->requests;
        w->nvalues = (int)s->nvalues;
        memcpy(w->values, s->values, s->nvalues * sizeof(double));
        /* Published after `now` was read (the owner is busy publishing): fresh. */
        uint64_t age = s->published_ns > now ? 0 : now - s->published_ns;
        w->reporting = age < (uint64_t)METRICS_STALE_MS * 1000000ull && process_alive(w->pid);
        /* Counts stay in the sums whether or not the worker still reports: its replacement
         * continues from them, so leaving them out would make the sums go backwards. */
        v->overflow += s->overflow;
        merge(v->merged, s);
    }
    pthread_mutex_unlock(&collect_lock);
    return v;
}

void metrics_view_free(metrics_view_t *v)
{
    if (!v) return;
    struct metrics_merged *m = v->merged;
    if (m) {
        for (size_t i = 0; i < m->nnames; i++)
            free(m->names[i]);
        free(m->names);
        free(m->name_ix.keys);
        free(m->name_ix.vals);
        free(m->series);
        free(m->series_ix.keys);
        free(m->series_ix.vals);
        free(m->hists);
        free(m->hist_ix.keys);
        free(m->hist_ix.vals);
        free(m);
    }
    free(v->workers);
    free(v);
}

void metrics_label(buf_t *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\')
            buf_puts(b, "\\\\");
        else if (*s == '"')
            buf_puts(b, "\\\"");
        else if (*s == '\n')
            buf_puts(b, "\\n");
        else
            buf_putc(b, *s);
    }
}

static void labels(buf_t *b, const char *method, const char *pattern)
{
    buf_puts(b, "method=\"");
    metrics_label(b, method);
    buf_puts(b, "\",route=\"");
    metrics_label(b, pattern);
    buf_putc(b, '"');
}

void metrics_render_requests(buf_t *b, const metrics_view_t *v)
{
    const struct metrics_merged *m = v->merged;
    buf_puts(b, "# HELP coachd_http_requests_total HTTP requests answered, by method, route "
                "pattern and status (all workers).\n# TYPE coachd_http_requests_total counter\n");
    for (size_t i = 0; i < m->nseries; i++) {
        const msum_t *s = &m->series[i];
        buf_puts(b, "coachd_http_requests_total{");
        labels(b, m->names[s->method], m->names[s->pattern]);
        buf_printf(b, ",status=\"%d\"} %llu\n", (int)s->status, (unsigned long long)s->count);
    }
    buf_puts(b, "# HELP coachd_http_request_duration_seconds Time from the request's start to its "
                "reply (streams: to their headers).\n"
                "# TYPE coachd_http_request_duration_seconds histogram\n");
    for (size_t i = 0; i < m->nhists; i++) {
        const mhist_t *h = &m->hists[i];
        const char *method = m->names[h->method], *pattern = m->names[h->pattern];
        uint64_t cum = 0;
        for (size_t k = 0; k < NBUCKETS; k++) {
            cum += h->buckets[k];
            buf_puts(b, "coachd_http_request_duration_seconds_bucket{");
            labels(b, method, pattern);
            buf_printf(b, ",le=\"%g\"} %llu\n", BUCKETS[k], (unsigned long long)cum);
        }
        buf_puts(b, "coachd_http_request_duration_seconds_bucket{");
        labels(b, method, pattern);
        buf_printf(b, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
        buf_puts(b, "coachd_http_request_duration_seconds_sum{");
        labels(b, method, pattern);
        buf_printf(b, "} %.6f\n", h->sum);
        buf_puts(b, "coachd_http_request_duration_seconds_count{");
        labels(b, method, pattern);
        buf_printf(b, "} %llu\n", (unsigned long long)h->count);
    }
    buf_printf(b,
               "# HELP coachd_metrics_overflow_total Requests left out of the series above "
               "because a worker's bounded table of series was full.\n"
               "# TYPE coachd_metrics_overflow_total counter\n"
               "coachd_metrics_overflow_total %llu\n",
               (unsigned long long)v->overflow);
}

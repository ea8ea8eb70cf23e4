/*
 * sse-load: opens many SSE streams against coachd, publishes timestamped events through Redis,
 * and measures delivery latency (publish -> client) and ping cadence.
 *
 *   sse-load --port 58180 --users FILE --streams N [--sources 127.0.0.1,127.0.0.2]
 *            [--redis 127.0.0.1:6379] [--events K] [--rate R] [--hold S] [--server-pid PID]
 *            [--parallel P] [--mentorship ID]
 *
 * FILE has one "userId token" per line; stream i belongs to line i % lines. Each event is
 * published to user:<userId> of a random line with data {"n":<event number>,"t":<publish time
 * in µs>}; every stream of that user should receive it. With --mentorship every stream opens
 * that mentorship's stream (its users must be allowed: PlatformAdmins) and every event goes to
 * mentorship:<ID>, so each one reaches all streams; the per-event spread is printed too. At most
 * P (128) streams are being opened at once (connect sent, status line not read): all at once,
 * their requests overflow the server's database queue. Why streams failed is counted by reason.
 * Source addresses rotate so more than one port range of connections can be opened
 * (127.0.0.0/8 is all loopback). The tool runs on one libuv loop and stops by itself after
 * --hold seconds.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

typedef struct user {
    char id[64];
    char token[128];
    int nstreams;
} user_t;

typedef struct conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    uv_write_t write;
    int index;
    user_t *user;
    bool open;    /* 200 and head seen */
    bool head;    /* still reading the head */
    bool opening; /* counted in `opening`: connect started, status line not yet seen */
    char line[512];
    size_t line_len;
    char event[32];
    double last_ping;
    double max_ping_gap, min_ping_gap;
    int pings;
    char req[512];
} conn_t;

static uv_loop_t *loop;
static user_t *users;
static int nusers;
static conn_t *conns;
static int nstreams = 1000, port = 58180, events = 1000, rate = 200, hold = 30;
static int opened, failed, opening, next_conn, closed;
/* Streams being opened at once (connect sent, status line not yet read). Pacing by connects
 * alone let every request of a large run reach the server together: its database queue
 * (DB_QUEUE_MAX) overflowed and the rest got 503. */
static int parallel = 128;
/* Fan-out mode: every stream listens on this mentorship's channel (its users must be allowed:
 * PlatformAdmins), and each event goes to all of them. */
static const char *mentorship;
/* Per event (fan-out mode): deliveries and the latency of the last stream reached. */
static int *ev_count;
static double *ev_last;
/* Why streams failed: the first few distinct reasons with their counts. */
#define NREASONS 16
static struct {
    char what[64];
    int n;
} reasons[NREASONS];

static void fail(const char *what)
{
    failed++;
    for (int i = 0; i < NREASONS; i++) {
        if (reasons[i].n == 0) snprintf(reasons[i].what, sizeof(reasons[i].what), "%s", what);
        if (strcmp(reasons[i].what, what) == 0) {
            reasons[i].n++;
            return;
        }
    }
}

static void print_reasons(void)
{
    for (int i = 0; i < NREASONS && reasons[i].n; i++)
        printf("  failed: %d %s\n", reasons[i].n, reasons[i].what);
}
static char *sources[64];
static int nsources;
static char redis_host[64] = "127.0.0.1";
static int redis_port = 6379;
static int server_pid;
static double *lat;
static size_t nlat, caplat;
static long long expected;
static uv_tcp_t redis_tcp;
static uv_connect_t redis_connect_req;
static bool redis_up;
static uv_timer_t pub_timer, stop_timer, open_timer;
static int published;
static double t_start, t_all_open;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long rss_kb(int pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long kb = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0) kb = atol(line + 6);
    fclose(f);
    return kb;
}

static void open_more(void);

/* The stream's opening is over (status line read, or it failed): room for the next one. */
static void open_done(conn_t *c)
{
    if (!c->opening) return;
    c->opening = false;
    opening--;
    open_more();
}

static void on_alloc(uv_handle_t *h, size_t s, uv_buf_t *b)
{
    (void)h;
    static char slab[65536];
    (void)s;
    *b = uv_buf_init(slab, sizeof(slab));
}

static void record(double ms)
{
    if (nlat == caplat) {
        caplat = caplat ? caplat * 2 : 65536;
        lat = realloc(lat, caplat * sizeof(double));
    }
    lat[nlat++] = ms;
}

static void handle_line(conn_t *c, const char *l, size_t n)
{
    if (c->head) {
        if (n == 0) {
            c->head = false;
        } else if (strncmp(l, "HTTP/1.1 ", 9) == 0) {
            if (strncmp(l + 9, "200", 3) == 0) {
                c->open = true;
                opened++;
            } else {
                char what[64];
                snprintf(what, sizeof(what), "status %.3s", l + 9);
                fail(what);
            }
            open_done(c);
        }
        return;
    }
    if (n >= 7 && strncmp(l, "event: ", 7) == 0) {
        snprintf(c->event, sizeof(c->event), "%.*s", (int)(n - 7), l + 7);
    } else if (n >= 6 && strncmp(l, "data: ", 6) == 0) {
        if (strcmp(c->event, "bench") == 0) {
            const char *t = strstr(l, "\"t\":"), *k = strstr(l, "\"n\":");
            if (t) {
                double ms = (now_s() * 1e6 - atof(t + 4)) / 1000.0;
                record(ms);
                int e = k ? atoi(k + 4) : -1;
                if (e >= 0 && e < events) {
                    ev_count[e]++;
                    if (ms > ev_last[e]) ev_last[e] = ms;
                }
            }
        } else if (strcmp(c->event, "ping") == 0) {
            double now = now_s();
            if (c->last_ping > 0) {
                double gap = now - c->last_ping;
                if (gap > c->max_ping_gap) c->max_ping_gap = gap;
                if (c->min_ping_gap == 0 || gap < c->min_ping_gap) c->min_ping_gap = gap;
            }
            c->last_ping = now;
            c->pings++;
        }
    }
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    conn_t *c = (conn_t *)s;
    if (n < 0) {
        if (c->open) {
            closed++;
        } else {
            char what[64];
            snprintf(what, sizeof(what), "read before the head: %s", uv_err_name((int)n));
            fail(what);
        }
        open_done(c);
        c->open = false;
        uv_close((uv_handle_t *)s, NULL);
        return;
    }
    for (ssize_t i = 0; i < n; i++) {
        char ch = b->base[i];
        if (ch == '\r') continue;
        if (ch == '\n') {
            handle_line(c, c->line, c->line_len);
            c->line_len = 0;
        } else if (c->line_len < sizeof(c->line) - 1) {
            c->line[c->line_len++] = ch;
        }
    }
}

static void on_written(uv_write_t *w, int st)
{
    (void)w;
    (void)st;
}

static void on_connected(uv_connect_t *cr, int st)
{
    conn_t *c = cr->data;
    if (st < 0) {
        char what[64];
        snprintf(what, sizeof(what), "connect: %s", uv_err_name(st));
        fail(what);
        uv_close((uv_handle_t *)&c->tcp, NULL);
        open_done(c);
        return;
    }
    char path[160];
    if (mentorship)
        snprintf(path, sizeof(path), "/api/events/mentorships/%s/events", mentorship);
    else
        snprintf(path, sizeof(path), "/api/events/users/me/events");
    int len = snprintf(c->req, sizeof(c->req),
                       "GET %s HTTP/1.1\r\nHost: bench\r\n"
                       "Accept: text/event-stream\r\nCookie: auth.session_token=%s\r\n\r\n",
                       path, c->user->token);
    uv_buf_t b = uv_buf_init(c->req, (unsigned)len);
    uv_write(&c->write, (uv_stream_t *)&c->tcp, &b, 1, on_written);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void open_more(void)
{
    while (opening < parallel && next_conn < nstreams) {
        conn_t *c = &conns[next_conn];
        c->index = next_conn;
        c->user = &users[next_conn % nusers];
        c->head = true;
        uv_tcp_init(loop, &c->tcp);
        struct sockaddr_in src, dst;
        uv_ip4_addr(sources[next_conn % nsources], 0, &src);
        /* bind() with port 0 searches the port space on every call, which gets slow with tens of
         * thousands of sockets; IP_BIND_ADDRESS_NO_PORT defers the choice to connect(). */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        int one = 1;
        next_conn++;
        if (fd < 0 || setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one)) != 0 ||
            bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 || uv_tcp_open(&c->tcp, fd) != 0) {
            char what[64];
            snprintf(what, sizeof(what), "socket/bind: %s", strerror(errno));
            fail(what);
            if (fd >= 0) close(fd);
            uv_close((uv_handle_t *)&c->tcp, NULL);
            continue;
        }
        uv_ip4_addr("127.0.0.1", port, &dst);
        c->connect.data = c;
        c->opening = true;
        opening++;
        int rc = uv_tcp_connect(&c->connect, &c->tcp, (struct sockaddr *)&dst, on_connected);
        if (rc != 0) {
            char what[64];
            snprintf(what, sizeof(what), "connect: %s", uv_err_name(rc));
            fail(what);
            c->opening = false;
            opening--;
            uv_close((uv_handle_t *)&c->tcp, NULL);
        }
    }
}

/* ---- Redis publisher: raw RESP over one TCP connection ---- */

static void on_redis_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    (void)s;
    (void)b;
    if (n < 0) redis_up = false;
}

static void on_redis(uv_connect_t *cr, int st)
{
    (void)cr;
    redis_up = st == 0;
    if (redis_up)
        uv_read_start((uv_stream_t *)&redis_tcp, on_alloc, on_redis_read);
    else
        fprintf(stderr, "redis connect failed: %s\n", uv_strerror(st));
}

typedef struct pubw {
    uv_write_t w;
    char buf[512];
} pubw_t;

static void on_pub_written(uv_write_t *w, int st)
{
    (void)st;
    free(w);
}

static void on_pub(uv_timer_t *t)
{
    (void)t;
    if (!redis_up || published >= events) return;
    user_t *u = &users[rand() % nusers];
    char msg[256], chan[128];
    /* Straight to pub/sub, as if published by coachd: streams take an event only when its id
     * (<ms>-<seq>) is past their position, so a far-future ms with a rising seq. n numbers the
     * event for the per-event figures. */
    int ml = snprintf(
        msg, sizeof(msg),
        "{\"id\":\"99999999999999-%d\",\"event\":\"bench\",\"data\":{\"n\":%d,\"t\":%.0f}}",
        published, published, now_s() * 1e6);
    int cl = mentorship ? snprintf(chan, sizeof(chan), "mentorship:%s", mentorship)
                        : snprintf(chan, sizeof(chan), "user:%s", u->id);
    pubw_t *p = malloc(sizeof(*p));
    int len = snprintf(p->buf, sizeof(p->buf), "*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n",
                       cl, chan, ml, msg);
    uv_buf_t b = uv_buf_init(p->buf, (unsigned)len);
    uv_write(&p->w, (uv_stream_t *)&redis_tcp, &b, 1, on_pub_written);
    published++;
    expected += mentorship ? opened - closed : u->nstreams;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void on_open_check(uv_timer_t *t)
{
    if (opened + failed >= nstreams && t_all_open == 0) {
        t_all_open = now_s();
        long kb = server_pid ? rss_kb(server_pid) : -1;
        printf("streams open: %d ok, %d failed in %.1f s; server RSS %.1f MB\n", opened, failed,
               t_all_open - t_start, kb / 1024.0);
        print_reasons();
        fflush(stdout);
        uv_timer_start(&pub_timer, on_pub, 1000, (uint64_t)(1000 / (rate > 0 ? rate : 1)) ?: 1);
        uv_timer_stop(t);
    }
}

static void on_stop(uv_timer_t *t)
{
    (void)t;
    long kb = server_pid ? rss_kb(server_pid) : -1;
    qsort(lat, nlat, sizeof(double), cmp);
    double p50 = nlat ? lat[nlat / 2] : 0, p99 = nlat ? lat[(size_t)(nlat * 0.99)] : 0;
    double pmax = nlat ? lat[nlat - 1] : 0;
    double gmin = 1e9, gmax = 0;
    int with_pings = 0;
    for (int i = 0; i < nstreams; i++) {
        if (conns[i].pings < 2) continue;
        with_pings++;
        if (conns[i].min_ping_gap < gmin) gmin = conns[i].min_ping_gap;
        if (conns[i].max_ping_gap > gmax) gmax = conns[i].max_ping_gap;
    }
    printf("events published %d, deliveries %zu of %lld expected\n", published, nlat, expected);
    printf("delivery latency ms: p50 %.2f p99 %.2f max %.2f\n", p50, p99, pmax);
    if (mentorship && published > 0) {
        /* Per event: how many streams it reached and when the last one read it. */
        int cmin = ev_count[0], cmax = ev_count[0];
        for (int e = 0; e < published; e++) {
            if (ev_count[e] < cmin) cmin = ev_count[e];
            if (ev_count[e] > cmax) cmax = ev_count[e];
        }
        qsort(ev_last, (size_t)published, sizeof(double), cmp);
        printf("per event: %d-%d streams reached; last stream read it after p50 %.2f max %.2f ms\n",
               cmin, cmax, ev_last[published / 2], ev_last[published - 1]);
    }
    if (with_pings)
        printf("ping gap s (streams with >= 2 pings: %d): min %.2f max %.2f\n", with_pings, gmin,
               gmax);
    printf("streams still open %d, closed by server %d; server RSS %.1f MB\n", opened - closed,
           closed, kb / 1024.0);
    fflush(stdout);
    exit(failed ? 1 : 0);
}

int main(int argc, char **argv)
{
    const char *users_file = NULL;
    char srcs[1024] = "127.0.0.1";
    static struct option opts[] = {{"port", 1, 0, 'p'},       {"users", 1, 0, 'u'},
                                   {"streams", 1, 0, 'n'},    {"sources", 1, 0, 's'},
                                   {"redis", 1, 0, 'r'},      {"events", 1, 0, 'e'},
                                   {"rate", 1, 0, 'R'},       {"hold", 1, 0, 'h'},
                                   {"server-pid", 1, 0, 'P'}, {"parallel", 1, 0, 'j'},
                                   {"mentorship", 1, 0, 'm'}, {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'p':
            port = atoi(optarg);
            break;
        case 'u':
            users_file = optarg;
            break;
        case 'n':
            nstreams = atoi(optarg);
            break;
        case 's':
            snprintf(srcs, sizeof(srcs), "%s", optarg);
            break;
        case 'r': {
            char *colon = strchr(optarg, ':');
            if (colon) {
                *colon = 0;
                redis_port = atoi(colon + 1);
            }
            snprintf(redis_host, sizeof(redis_host), "%s", optarg);
            break;
        }
        case 'e':
            events = atoi(optarg);
            break;
        case 'R':
            rate = atoi(optarg);
            break;
        case 'h':
            hold = atoi(optarg);
            break;
        case 'P':
            server_pid = atoi(optarg);
            break;
        case 'j':
            parallel = atoi(optarg) > 0 ? atoi(optarg) : 1;
            break;
        case 'm':
            mentorship = optarg;
            break;
        default:
            fprintf(stderr, "see the comment at the top of sse_load.c\n");
            return 2;
        }
    }
    if (!users_file) {
        fprintf(stderr, "--users FILE is required\n");
        return 2;
    }
    for (char *tok = strtok(srcs, ","); tok && nsources < 64; tok = strtok(NULL, ","))
        sources[nsources++] = tok;
    FILE *f = fopen(users_file, "r");
    if (!f) {
        perror(users_file);
        return 2;
    }
    int cap = 1024;
    users = calloc((size_t)cap, sizeof(*users));
    while (fscanf(f, "%63s %127s", users[nusers].id, users[nusers].token) == 2) {
        if (++nusers == cap) {
            cap *= 2;
            users = realloc(users, (size_t)cap * sizeof(*users));
            memset(users + nusers, 0, (size_t)(cap - nusers) * sizeof(*users));
        }
    }
    fclose(f);
    if (nusers == 0) {
        fprintf(stderr, "no users in %s\n", users_file);
        return 2;
    }
    for (int i = 0; i < nstreams; i++)
        users[i % nusers].nstreams++;
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    ev_count = calloc((size_t)(events > 0 ? events : 1), sizeof(*ev_count));
    ev_last = calloc((size_t)(events > 0 ? events : 1), sizeof(*ev_last));
    loop = uv_default_loop();
    conns = calloc((size_t)nstreams, sizeof(*conns));
    struct sockaddr_in ra;
    uv_ip4_addr(redis_host, redis_port, &ra);
    uv_tcp_init(loop, &redis_tcp);
    uv_tcp_connect(&redis_connect_req, &redis_tcp, (struct sockaddr *)&ra, on_redis);
    uv_timer_init(loop, &pub_timer);
    uv_timer_init(loop, &stop_timer);
    uv_timer_init(loop, &open_timer);
    t_start = now_s();
    uv_timer_start(&open_timer, on_open_check, 100, 100);
    uv_timer_start(&stop_timer, on_stop, (uint64_t)hold * 1000, 0);
    open_more();
    return uv_run(loop, UV_RUN_DEFAULT);
}

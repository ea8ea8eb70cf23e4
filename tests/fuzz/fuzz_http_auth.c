/*
 * The streaming file routes as a signed-in client reaches them: POST /api/files/upload
 * (routes/files_upload.c: multipart into the storage writer of rt/storage.c on the thread pool,
 * then the file row), PUT /api/files/local and GET /api/files/local (routes/files_local.c:
 * presigned local URLs, streamed into the writer or out of a file), through the real core/http.c,
 * the real router and the real guard (routes/context.c: session cookie -> user -> organization
 * -> role against PostgreSQL, its per-worker cache invalidated through Redis).
 *
 * A target of its own rather than a mode of fuzz_http: it needs a PostgreSQL and a Redis
 * (scripts/fuzz starts them for it: DATABASE_URL, REDIS_URL), links every library of the
 * server, and runs five to ten times slower, so fuzz_http keeps its fast, service-free inputs.
 * Not reached here: the s3 driver (test_files_s3.py), and deadlines of a minute (an input lasts
 * seconds: a client that stalls is ended by its own FIN or reset).
 *
 * Set-up (LLVMFuzzerInitialize), as a worker does (main.c run_worker) on a temporary STORAGE_DIR:
 * migrations, then every module and route; the world is made over HTTP through the same server:
 * first-run (a PlatformAdmin), sign-in, an organization, a member (Coach) signed up and added to
 * it. Three objects are written under STORAGE_DIR/Fixture (upper case: no upload prefix can
 * reach it): 6 MiB, 1 KiB and empty, to be downloaded through presigned GET URLs.
 *
 * An input is one client connection. Its first byte is the client's manner:
 *   bits 0-3  the size of the pieces it sends, with a loop turn between pieces (0: as much as the
 *             socket takes; n: 4*n^4 bytes, 4 to 202,500; past the first 64 KiB of a send,
 *             pieces of 64 KiB at least)
 *   bits 4-5  how it ends after the last byte of its program (so that leaving at the worst
 *             moment is one mutation away): 2 (' ') reads the answers, half-closes and waits for
 *             the server to close; 3 half-closes at once; 0 resets at once; 1 resets after one
 *             turn of the loop
 *   bit 6     it reads nothing until its program has ended (a slow reader: the server's writes
 *             back up)
 *   bit 7     its receive buffer is small (4 KiB)
 * The rest is its program: bytes sent as they are, except for these escapes:
 *
 *   $S  the member's session token ($A the PlatformAdmin's)      $O  the organization's id
 *   $G  the query of a valid presigned GET of the 6 MiB object ($g 1 KiB, $z empty, $m missing)
 *   $P<n>  the query of a valid presigned PUT of n bytes of text/plain (a fresh key each time)
 *   $F<n><c>  n copies of the byte c (at most 8 MiB): large bodies and chunks in a small input
 *   $L  the length of the body that follows: from the end of the next head (CRLF CRLF) to the
 *       next action below or the end of the input
 *   $W  wait until the server has been quiet for a moment (no answer arriving, no job running)
 *   $J  wait until no query, thread-pool or file job is running (a writer has finished its step),
 *       whatever arrives meanwhile                            $T  one turn of the loop
 *   $E  FIN: the client half-closes here (the rest is not sent)
 *   $R  RST: the client resets the connection here (the program ends)
 *   $$  a literal '$'
 *
 * After the program and its ending, the client reads what is left and closes (a reset). Then the
 * loop runs until it is idle: no connection, no thread-pool or file job, no query busy or queued.
 * Oracles: the sanitizers (a use-after-free when an upload's writer outlives its request, say);
 * every connection is closed; no temporary file is left in STORAGE_DIR/.tmp once the loop is
 * idle (the writer of every upload was finished or aborted).
 * Stored objects are removed after each input; the fixtures stay.
 *
 * Inputs naming an /api/ path outside /api/files/ are refused (-1): sign-out, account or
 * organization changes would spoil the session for every later input. Should the member's session
 * answer 401 all the same, it is signed in again.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/http.h"
#include "core/log.h"
#include "core/random.h"
#include "db/db.h"
#include "domain/ids.h"
#include "routes/routes.h"
#include "rt/curlm.h"
#include "rt/mail.h"
#include "rt/outbox.h"
#include "rt/push.h"
#include "rt/redis.h"
#include "rt/storage.h"
#include "fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIXTURE_BIG (6u * 1024 * 1024)
#define FIXTURE_SMALL 1024u
#define FILL_MAX (8u * 1024 * 1024)
#define EXPANDED_MAX (16u * 1024 * 1024)
/* The client's program, then its ending (at most 1 s of answers and 1.5 s for the server's
 * close), then the settling: at most 8.5 s in all, under libFuzzer's -timeout of 10 s. */
#define PROGRAM_MS 3000
#define SETTLE_MS 3000 /* the loop must be idle within this once the client has gone */
#define PASSWORD "Quartz-meadow-lantern-61"
#define ADMIN_EMAIL "fuzz-admin@coachd.test"

static uv_loop_t *loop;
static int port;
static char storage_dir[PATH_MAX];
static char tmp_dir[PATH_MAX + 8];
static char tok_member[256], tok_admin[256], org_id[64], member_email[96];
static char *q_big, *q_small, *q_empty, *q_missing;
static arena_t fixture_arena;

/* ---- the loop and the client socket ---- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* What the client received on its connection: the first bytes are kept to read statuses. */
typedef struct client {
    int fd;
    bool reading; /* drains the socket on every turn */
    bool eof;     /* the server closed its side (or reset) */
    buf_t got;
    size_t total;
} client_t;

static size_t client_drain(client_t *c)
{
    static char scratch[1 << 16];
    size_t n = 0;
    if (c->fd < 0 || c->eof) return 0;
    for (;;) {
        ssize_t r = read(c->fd, scratch, sizeof(scratch));
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
            c->eof = true;
            return n + 1; /* EOF counts as progress */
        }
        if (r < 0) return n;
        if (c->got.len < 64 * 1024) buf_append(&c->got, scratch, (size_t)r);
        c->total += (size_t)r;
        n += (size_t)r;
    }
}

/* One turn: waits at most `ms` for the loop or the client's socket to have something (0: no
 * wait), runs the loop once without blocking, then reads what arrived when the client reads. */
static size_t turn(client_t *c, int ms, short client_events)
{
    struct pollfd p[2] = {{.fd = uv_backend_fd(loop), .events = POLLIN},
                          {.fd = c ? c->fd : -1, .events = client_events}};
    if (ms > 0) {
        int t = uv_backend_timeout(loop);
        if (t < 0 || t > ms) t = ms;
        if (t > 0) poll(p, c && c->fd >= 0 && client_events ? 2 : 1, t);
    }
    uv_run(loop, UV_RUN_NOWAIT);
    return c && c->reading ? client_drain(c) : 0;
}

static bool pool_busy(void)
{
    db_pool_stats_t s;
    db_pool_stats(&s);
    return loop->active_reqs.count > 0 || s.busy > 0 || s.queued > 0;
}

/* A non-blocking connect waited for with poll (see fuzz_http.c: a blocking one can be ended by
 * libFuzzer's SIGALRM); SO_LINGER 0, so closing resets and leaves no TIME_WAIT. */
static int client_connect(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    for (int tries = 0;; tries++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        int err = fd < 0 ? errno : 0;
        if (fd >= 0 && connect(fd, (const struct sockaddr *)&a, sizeof(a)) != 0) {
            err = errno;
            if (err == EINPROGRESS || err == EINTR) {
                err = ETIMEDOUT;
                for (int waited = 0; waited < 800; waited++) {
                    uv_run(loop, UV_RUN_NOWAIT);
                    struct pollfd p = {.fd = fd, .events = POLLOUT};
                    int n = poll(&p, 1, 10);
                    if (n < 0 && errno == EINTR) continue;
                    if (n != 0) {
                        socklen_t len = sizeof(err);
                        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
                        break;
                    }
                }
            }
        }
        if (fd >= 0 && err == 0) {
            struct linger l = {.l_onoff = 1, .l_linger = 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
            return fd;
        }
        if (fd >= 0) close(fd);
        if (err != EADDRNOTAVAIL || tries >= 3000) {
            fprintf(stderr, "fuzz_http_auth: connect to the server: %s\n", strerror(err));
            abort();
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
    }
}

/* Sends all of data (the loop runs meanwhile); false when the server stopped taking it. */
static bool client_send(client_t *c, const char *data, size_t len, size_t piece, uint64_t deadline)
{
    size_t off = 0;
    uint64_t stuck_since = 0;
    while (off < len) {
        /* Past its first 64 KiB a send goes in pieces of 64 KiB at least: a head and the start
         * of a body are split as the input says, and a body of megabytes still takes few turns. */
        size_t step = off >= 64 * 1024 && piece < 64 * 1024 ? 64 * 1024 : piece;
        size_t k = len - off < step ? len - off : step;
        ssize_t w = send(c->fd, data + off, k, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            stuck_since = 0;
            turn(c, 0, 0);
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR) return false; /* reset by the server */
        /* The socket is full: the server is not reading (backpressure, a paused upload). */
        uint64_t t = now_ms();
        if (!stuck_since) stuck_since = t;
        if (t - stuck_since > 1000 || t > deadline) return false;
        turn(c, 5, POLLOUT);
    }
    return true;
}

/* Runs the loop until the server is quiet: nothing arrives (answers only: a $J ignores them)
 * and no query, thread-pool or file job is running. The loop's request count also holds the
 * server's writes: to a client that reads nothing they never finish, so for such a client a count
 * that has stopped changing for 25 turns (about 50 ms) counts as quiet too. */
static void client_wait(client_t *c, uint64_t deadline, bool answers)
{
    int quiet = 0;
    unsigned last = loop->active_reqs.count;
    for (;;) {
        unsigned reqs = loop->active_reqs.count;
        if (quiet >= (reqs == 0 ? 4 : 25) || now_ms() >= deadline) return;
        size_t got = turn(c, 2, c->reading ? POLLIN : 0);
        db_pool_stats_t s;
        db_pool_stats(&s);
        reqs = loop->active_reqs.count;
        bool still = (!answers || got == 0) && s.busy == 0 && s.queued == 0 &&
                     (reqs == 0 || (!c->reading && reqs == last));
        quiet = still ? quiet + 1 : 0;
        last = reqs;
    }
}

/* ---- plain requests for the set-up ---- */

typedef struct answer {
    int status;
    char cookie[256];
    json_t *body;
} answer_t;

static void call(const char *method, const char *path, const char *token, const char *json,
                 answer_t *out)
{
    buf_t req = BUF_INIT;
    buf_printf(&req,
               "%s %s HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n"
               "Content-Type: application/json\r\nContent-Length: %zu\r\n",
               method, path, json ? strlen(json) : 0);
    if (token) buf_printf(&req, "Cookie: auth.session_token=%s\r\n", token);
    if (org_id[0]) buf_printf(&req, "X-Organization-Id: %s\r\n", org_id);
    buf_printf(&req, "\r\n%s", json ? json : "");
    client_t c = {.fd = client_connect(), .reading = true};
    uint64_t deadline = now_ms() + 30000;
    if (!client_send(&c, req.data, req.len, req.len, deadline)) abort();
    while (!c.eof && now_ms() < deadline)
        turn(&c, 10, POLLIN);
    close(c.fd);
    buf_free(&req);
    memset(out, 0, sizeof(*out));
    buf_append(&c.got, "", 1);
    const char *r = c.got.data;
    if (!c.eof || strncmp(r, "HTTP/1.1 ", 9) != 0) {
        fprintf(stderr, "fuzz_http_auth: %s %s: no answer\n", method, path);
        abort();
    }
    out->status = atoi(r + 9);
    const char *ck = strstr(r, "auth.session_token=");
    if (ck) {
        ck += strlen("auth.session_token=");
        size_t n = strcspn(ck, ";\r\n");
        if (n < sizeof(out->cookie)) memcpy(out->cookie, ck, n);
    }
    const char *b = strstr(r, "\r\n\r\n");
    if (b) out->body = json_loads(b + 4, JSON_DECODE_ANY, NULL);
    buf_free(&c.got);
}

static const char *json_path(json_t *j, const char *a, const char *b)
{
    json_t *o = json_object_get(j, a);
    const char *s = json_string_value(json_object_get(o, b));
    return s ? s : "";
}

static void expect(const answer_t *a, int status, const char *what)
{
    if (a->status == status) return;
    char *s = a->body ? json_dumps(a->body, 0) : NULL;
    fprintf(stderr, "fuzz_http_auth: %s answered %d: %s\n", what, a->status, s ? s : "");
    abort();
}

static void sign_in_member(void)
{
    answer_t a;
    char body[256];
    snprintf(body, sizeof body, "{\"email\":\"%s\",\"password\":\"" PASSWORD "\"}", member_email);
    call("POST", "/api/auth/sign-in/email", NULL, body, &a);
    expect(&a, 200, "member sign-in");
    snprintf(tok_member, sizeof tok_member, "%s", a.cookie);
    json_decref(a.body);
}

/* The world of every input: a PlatformAdmin, an organization, a Coach member of it. */
static void seed(void)
{
    answer_t a;
    call("POST", "/api/setup/first-run", NULL,
         "{\"email\":\"" ADMIN_EMAIL "\",\"password\":\"" PASSWORD "\",\"name\":\"Fuzz Admin\"}",
         &a);
    if (a.status != 201 && a.status != 409) expect(&a, 201, "first-run");
    json_decref(a.body);
    call("POST", "/api/auth/sign-in/email", NULL,
         "{\"email\":\"" ADMIN_EMAIL "\",\"password\":\"" PASSWORD "\"}", &a);
    expect(&a, 200, "admin sign-in");
    snprintf(tok_admin, sizeof tok_admin, "%s", a.cookie);
    json_decref(a.body);

    uint8_t rnd[6];
    random_bytes(rnd, sizeof rnd);
    char body[256];
    snprintf(body, sizeof body, "{\"name\":\"Fuzz %02x%02x%02x%02x%02x%02x\"}", rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5]);
    call("POST", "/api/organizations", tok_admin, body, &a);
    expect(&a, 201, "organization");
    snprintf(org_id, sizeof org_id, "%s", json_path(a.body, "data", "id"));
    json_decref(a.body);

    snprintf(member_email, sizeof member_email, "fuzz-%02x%02x%02x%02x%02x%02x@coachd.test", rnd[0],
             rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
    snprintf(body, sizeof body,
             "{\"email\":\"%s\",\"password\":\"" PASSWORD "\",\"name\":\"Fuzz Coach\"}",
             member_email);
    call("POST", "/api/auth/sign-up/email", NULL, body, &a);
    expect(&a, 200, "member sign-up");
    char user_id[64];
    snprintf(user_id, sizeof user_id, "%s", json_path(a.body, "user", "id"));
    snprintf(tok_member, sizeof tok_member, "%s", a.cookie);
    json_decref(a.body);

    char path[128];
    snprintf(path, sizeof path, "/api/organizations/%s/users", org_id);
    snprintf(body, sizeof body, "{\"userId\":\"%s\",\"roleInOrganization\":\"Coach\"}", user_id);
    call("POST", path, tok_admin, body, &a);
    expect(&a, 201, "membership");
    json_decref(a.body);

    call("GET", "/api/files/mentorship/00000000-0000-4000-8000-000000000000/attachments",
         tok_member, NULL, &a);
    if (a.status == 401 || a.status == 400) expect(&a, 404, "the member's session");
    json_decref(a.body);
    if (!tok_member[0] || !tok_admin[0] || !org_id[0]) abort();
}

/* A stored object under the Fixture prefix and the query of its presigned GET. */
static char *fixture(const char *name, const char *mime, size_t size)
{
    uint8_t rnd[16];
    char uuid[IDS_UUID_LEN + 1];
    random_bytes(rnd, sizeof rnd);
    ids_uuid_v4(rnd, uuid);
    char *key = storage_key_make(&fixture_arena, "Fixture", uuid, name);
    if (size != (size_t)-1) {
        char path[PATH_MAX + 512];
        snprintf(path, sizeof path, "%s/Fixture", storage_dir);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/Fixture/%s", storage_dir, uuid);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/%s", storage_dir, key);
        FILE *f = fopen(path, "wb");
        if (!f) abort();
        for (size_t i = 0; i < size; i++)
            fputc('a' + (int)(i % 26), f);
        fclose(f);
    }
    char *url = storage_presign_get(&fixture_arena, key, name, mime, 7 * 24 * 3600);
    if (!url || !strchr(url, '?')) abort();
    return strchr(url, '?') + 1;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_storage_dir(void)
{
    nftw(storage_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    if (!getenv("DATABASE_URL") || !getenv("REDIS_URL")) {
        fprintf(stderr, "fuzz_http_auth needs DATABASE_URL and REDIS_URL (a PostgreSQL database "
                        "of its own, a Redis): scripts/fuzz starts them\n");
        abort();
    }
    const char *base = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(storage_dir, sizeof storage_dir, "%s/fuzz_http_auth.XXXXXX", base);
    if (!mkdtemp(storage_dir)) abort();
    atexit(remove_storage_dir);
    snprintf(tmp_dir, sizeof tmp_dir, "%s/.tmp", storage_dir);
    char mail_dir[PATH_MAX + 8];
    snprintf(mail_dir, sizeof mail_dir, "%s/.mail", storage_dir);
    char push_dir[PATH_MAX + 8];
    snprintf(push_dir, sizeof push_dir, "%s/.push", storage_dir);
    setenv("STORAGE_DIR", storage_dir, 1);
    setenv("STORAGE_DRIVER", "local", 1);
    setenv("MAIL_DIR", mail_dir, 1);
    setenv("PUSH_DIR", push_dir, 1); /* development without PUSH_URL: push goes to files */
    setenv("APP_ENV", "development", 1);
    setenv("LOG_LEVEL", "error", 1);
    setenv("TRUSTED_ORIGINS", "http://trusted.example", 1);
    setenv("PUBLIC_URL", "http://fuzz.example", 1);
    setenv("DATABASE_POOL_SIZE", "4", 1);
    /* Every start signs in and up (libFuzzer's -jobs and -merge start many): no auth limit. The
     * inputs cannot reach those routes anyway (see expand()). */
    setenv("AUTH_RATE_LIMIT_POINTS", "0", 1);
    unsetenv("STORAGE_SECRET"); /* the secret comes from the database, as in production */
    unsetenv("SMTP_URL");
    unsetenv("PUSH_URL");
    if (config_load() != 0) abort();
    log_set_level(LOG_ERROR);
    if (db_migrate(cfg.database_url) != 0) abort();

    loop = uv_default_loop();
    if (curlm_init(loop) != 0 || mail_init(loop) != 0 || push_init(loop) != 0 ||
        redis_init(loop, cfg.redis_url) != 0 ||
        db_init(loop, cfg.database_url, cfg.db_pool_size) != 0 || outbox_init(loop) != 0 ||
        storage_init(loop) != 0)
        abort();
    routes_init(loop);
    int fd;
    if (http_listen_socket("127.0.0.1", 0, &fd) != 0) abort();
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    getsockname(fd, (struct sockaddr *)&a, &alen);
    port = ntohs(a.sin_port);
    if (http_server_start_fd(loop, fd) != 0) abort();

    /* The storage secret (signatures of local URLs) and Redis (the context cache) come up in
     * the background. */
    uint64_t deadline = now_ms() + 30000;
    while ((!storage_ready() || !redis_connected() || !db_available()) && now_ms() < deadline)
        turn(NULL, 10, 0);
    if (!storage_ready()) {
        fprintf(stderr, "fuzz_http_auth: the storage secret did not load\n");
        abort();
    }
    seed();
    arena_init(&fixture_arena);
    q_big = fixture("big.bin", "application/octet-stream", FIXTURE_BIG);
    q_small = fixture("small.txt", "text/plain", FIXTURE_SMALL);
    q_empty = fixture("empty.txt", "text/plain", 0);
    q_missing = fixture("missing.txt", "text/plain", (size_t)-1);
    return 0;
}

/* ---- the client's program ---- */

enum { OP_SEND, OP_FIN, OP_RST, OP_WAIT, OP_JOBS, OP_TURN };

typedef struct op {
    int kind;
    size_t off, len; /* OP_SEND: bytes of the expanded buffer */
} op_t;

typedef struct program {
    buf_t out;
    op_t *ops;
    size_t nops, cap;
    size_t seg_start; /* first byte of the segment being expanded */
    size_t marks[64]; /* $L positions in the current segment */
    int nmarks;
    bool uses_member;
    arena_t a;
} program_t;

static void add_op(program_t *p, int kind, size_t off, size_t len)
{
    if (p->nops == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->ops = realloc(p->ops, p->cap * sizeof(op_t));
        if (!p->ops) abort();
    }
    p->ops[p->nops++] = (op_t){kind, off, len};
}

/* Ends the segment being expanded: each $L gets its body's length (the last first, so that an
 * earlier body counts the digits of a later one), then the segment becomes one send. */
static void close_segment(program_t *p)
{
    for (int i = p->nmarks - 1; i >= 0; i--) {
        size_t at = p->marks[i];
        const char *head_end = memmem(p->out.data + at, p->out.len - at, "\r\n\r\n", 4);
        size_t body = head_end ? p->out.len - (size_t)(head_end + 4 - p->out.data) : 0;
        char digits[24];
        int n = snprintf(digits, sizeof digits, "%zu", body);
        buf_reserve(&p->out, (size_t)n);
        memmove(p->out.data + at + n, p->out.data + at, p->out.len - at);
        memcpy(p->out.data + at, digits, (size_t)n);
        p->out.len += (size_t)n;
    }
    p->nmarks = 0;
    if (p->out.len > p->seg_start) add_op(p, OP_SEND, p->seg_start, p->out.len - p->seg_start);
    p->seg_start = p->out.len;
}

static size_t read_number(const uint8_t *d, size_t n, size_t *i, size_t max)
{
    size_t v = 0;
    while (*i < n && d[*i] >= '0' && d[*i] <= '9') {
        v = v * 10 + (size_t)(d[*i] - '0');
        if (v > max) v = max;
        (*i)++;
    }
    return v;
}

/* Expands the escapes; false for an input outside the files area (see the top). */
static bool expand(program_t *p, const uint8_t *d, size_t n)
{
    for (size_t i = 0; i < n && p->out.len < EXPANDED_MAX;) {
        if (d[i] != '$' || i + 1 == n) {
            const uint8_t *next = memchr(d + i, '$', n - i);
            size_t k = next ? (size_t)(next - (d + i)) : n - i;
            if (k == 0) k = 1;
            buf_append(&p->out, (const char *)d + i, k);
            i += k;
            continue;
        }
        char e = (char)d[i + 1];
        i += 2;
        switch (e) {
        case 'S':
            p->uses_member = true;
            buf_puts(&p->out, tok_member);
            break;
        case 'A':
            buf_puts(&p->out, tok_admin);
            break;
        case 'O':
            buf_puts(&p->out, org_id);
            break;
        case 'G':
            buf_puts(&p->out, q_big);
            break;
        case 'g':
            buf_puts(&p->out, q_small);
            break;
        case 'z':
            buf_puts(&p->out, q_empty);
            break;
        case 'm':
            buf_puts(&p->out, q_missing);
            break;
        case 'P': {
            size_t size = read_number(d, n, &i, FILL_MAX);
            uint8_t rnd[16];
            char uuid[IDS_UUID_LEN + 1];
            random_bytes(rnd, sizeof rnd);
            ids_uuid_v4(rnd, uuid);
            char *key = storage_key_make(&p->a, "fuzz", uuid, "put.txt");
            char *url = storage_presign_put(&p->a, key, "text/plain", size, 900);
            if (url && strchr(url, '?')) buf_puts(&p->out, strchr(url, '?') + 1);
            break;
        }
        case 'F': {
            size_t count = read_number(d, n, &i, FILL_MAX);
            char c = i < n ? (char)d[i++] : 'x';
            if (count > EXPANDED_MAX - p->out.len) count = EXPANDED_MAX - p->out.len;
            buf_reserve(&p->out, count);
            memset(p->out.data + p->out.len, c, count);
            p->out.len += count;
            break;
        }
        case 'L':
            if (p->nmarks < 64) p->marks[p->nmarks++] = p->out.len;
            break;
        case 'W':
        case 'J':
        case 'T':
        case 'E':
        case 'R':
            close_segment(p);
            add_op(p,
                   e == 'W'   ? OP_WAIT
                   : e == 'J' ? OP_JOBS
                   : e == 'T' ? OP_TURN
                   : e == 'E' ? OP_FIN
                              : OP_RST,
                   0, 0);
            break;
        default: /* "$$", or a '$' of no escape: the byte itself */
            buf_putc(&p->out, '$');
            if (e != '$') i--;
            break;
        }
    }
    close_segment(p);
    /* Only the files area: see the top of this file. */
    for (const char *s = p->out.data, *end = p->out.data + p->out.len;
         (s = memmem(s, (size_t)(end - s), "/api/", 5)) != NULL; s += 5)
        if ((size_t)(end - s) < 11 || memcmp(s + 5, "files/", 6) != 0) return false;
    return true;
}

static size_t tmp_files_left(void)
{
    DIR *d = opendir(tmp_dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            fprintf(stderr, "fuzz_http_auth: left in STORAGE_DIR/.tmp: %s\n", e->d_name);
            n++;
        }
    closedir(d);
    return n;
}

/* Removes what the input stored (every top-level folder but the fixtures and .tmp). */
static void remove_stored(void)
{
    DIR *d = opendir(storage_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "Fixture") == 0) continue;
        char path[PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", storage_dir, e->d_name);
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

static void run_program(const program_t *p, uint8_t control)
{
    size_t n = control & 15;
    size_t piece = n ? 4 * n * n * n * n : 1 << 20;
    int ending = (control >> 4) & 3;
    client_t c = {.fd = client_connect(), .reading = !(control & 0x40)};
    if (control & 0x80) {
        int small = 4096;
        setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    turn(&c, 0, 0); /* accept */
    uint64_t deadline = now_ms() + PROGRAM_MS;
    bool fin = false, sending = true;
    for (size_t i = 0; i < p->nops && now_ms() < deadline; i++) {
        const op_t *o = &p->ops[i];
        if (o->kind == OP_RST) {
            close(c.fd); /* SO_LINGER 0: a reset */
            c.fd = -1;
            break;
        }
        switch (o->kind) {
        case OP_SEND:
            if (sending && !fin)
                sending = client_send(&c, p->out.data + o->off, o->len, piece, deadline);
            break;
        case OP_FIN:
            if (!fin) shutdown(c.fd, SHUT_WR);
            fin = true;
            break;
        case OP_WAIT:
            client_wait(&c, deadline, true);
            break;
        case OP_JOBS:
            client_wait(&c, deadline, false);
            break;
        case OP_TURN:
            turn(&c, 0, 0);
            break;
        }
    }
    if (c.fd >= 0 && (ending == 0 || ending == 1)) {
        if (ending == 1) turn(&c, 0, 0);
        close(c.fd); /* SO_LINGER 0: a reset */
    } else if (c.fd >= 0) {
        /* The client reads the answers (ending 2: first, then half-closes; 3: after the FIN),
         * and waits for the server's end. */
        c.reading = true;
        if (control & 0x80) { /* the rest of a download, at the pace of a normal buffer */
            int normal = 1 << 20;
            setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &normal, sizeof normal);
        }
        if (ending == 2) client_wait(&c, now_ms() + 1000, true);
        if (!fin) shutdown(c.fd, SHUT_WR);
        uint64_t end = now_ms() + 1500;
        while (!c.eof && now_ms() < end)
            turn(&c, 5, POLLIN);
        close(c.fd);
    }
    /* Idle: the server has closed every connection and nothing it started is still running. */
    uint64_t end = now_ms() + SETTLE_MS;
    while ((http_server_conn_count() > 0 || pool_busy()) && now_ms() < end)
        turn(NULL, 2, 0);
    FUZZ_CHECK(http_server_conn_count() == 0);
    FUZZ_CHECK(!pool_busy());
    FUZZ_CHECK(tmp_files_left() == 0);

    /* The member's session must stay usable for the inputs after this one. */
    if (p->uses_member && c.got.data && memmem(c.got.data, c.got.len, " 401 ", 5)) {
        answer_t a;
        call("GET", "/api/files/mentorship/00000000-0000-4000-8000-000000000000/attachments",
             tok_member, NULL, &a);
        json_decref(a.body);
        if (a.status == 401) sign_in_member();
    }
    buf_free(&c.got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    program_t p = {0};
    arena_init(&p.a);
    buf_reserve(&p.out, 1); /* never a NULL buffer, even for an empty program */
    bool ok = expand(&p, data + 1, size - 1);
    if (ok) run_program(&p, data[0]);
    remove_stored();
    buf_free(&p.out);
    free(p.ops);
    arena_free(&p.a);
    return ok ? 0 : -1;
}

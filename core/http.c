/*
 * HTTP/1.1 connections on the libuv loop.
 *
 * Reads land directly in the connection's input buffer (alloc_cb hands out its spare room) and
 * llhttp parses from there. One request is live per connection: when a message is complete the
 * parser pauses, the request is routed, and the bytes of any pipelined request wait in the
 * buffer until the response is written, so answers leave in order. Reading goes on while a
 * request is handled (up to a cap) so a client that disconnects is noticed at once and its
 * request is marked gone.
 *
 * Timers (one uv_timer_t per connection): 60 s idle between requests, 30 s for a whole head
 * (a dribbling client does not reset it), 30 s between body reads (at most
 * REQUEST_TIMEOUT_SECONDS), and STREAM_WRITE_TIMEOUT_SECONDS without progress for a response
 * the client does not read: a whole answer is closed when its timer finds nothing delivered
 * since the last one (conn_delivered), and a slow reader that keeps reading gets a large answer
 * whole (a calendar feed is megabytes). A streaming answer (SSE, download) has the same write
 * deadline, watched differently: while it holds unflushed bytes, a tick every quarter of the
 * deadline checks that some were delivered since the last one, and closes it after a whole
 * deadline without progress. The same timer runs a stream's drain callback and the
 * release of its head on the next loop turn.
 *
 * Ownership: http_conn_t is freed only in its uv_close callback. The connection holds one
 * reference on its live request; see http.h for the request's lifetime.
 */
#include "core/hash.h"
#include "core/http.h"

#include <errno.h>
#include <limits.h>
#include <linux/sockios.h>
#include <llhttp.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/checked.h"
#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/mem.h"
#include "core/netaddr.h"
#include "core/router.h"
#include "core/url.h"

#define READ_CHUNK (16 * 1024)
#define PIPELINE_CAP (64 * 1024) /* bytes buffered while a request is being handled */
#define MAX_HEADERS 100
#define IDLE_TIMEOUT_MS 60000
#define HEAD_TIMEOUT_MS 30000
#define BODY_TIMEOUT_MS 30000
/* Lingering close (docs/api.md "Limits"): after answering a request whose body was not read,
 * read and discard up to this much for up to this long, so the client sees the answer, not a
 * reset. */
#define LINGER_MAX_BYTES (16u * 1024 * 1024)
#define LINGER_TIMEOUT_MS 10000
/* Bodies of OPTIONS and of paths no route takes are read and discarded up to this size. */
#define NO_ROUTE_BODY_LIMIT (64 * 1024)
/* Connection limits (docs/security.md "Connection limits"), per worker; the environment
 * variables MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP (0: no cap) and REQUEST_TIMEOUT_SECONDS
 * override them when the server starts. */
#define DEFAULT_MAX_CONNECTIONS 10000
#define DEFAULT_MAX_CONNECTIONS_PER_IP 256
#define DEFAULT_REQUEST_TIMEOUT_S 60
#define DEFAULT_STREAM_WRITE_TIMEOUT_S 60
#define IP_BUCKETS 4096

enum conn_state {
    CONN_IDLE,      /* waiting for the first byte of a request */
    CONN_HEAD,      /* request head arriving */
    CONN_BODY,      /* request body arriving (buffered or streamed) */
    CONN_HANDLING,  /* request complete (or streamed), handler running */
    CONN_WRITING,   /* response queued, waiting for the write to finish */
    CONN_STREAMING, /* response stream open */
    CONN_LINGER,    /* answered and shut down for writing; discarding what the client still sends */
    CONN_CLOSING,
};

struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    llhttp_t parser;
    buf_t in;      /* unparsed input */
    size_t in_off; /* parsed prefix of `in` not yet discarded */
    http_req_t *req;
    enum conn_state state;
    bool reading;
    bool body_paused;  /* streamed body: route asked for backpressure */
    bool in_process;   /* conn_process running (re-entrancy guard) */
    bool again;        /* conn_process should loop */
    bool msg_complete; /* parser finished a message not yet dispatched */
    bool head_ready;   /* streamed-body route: head parsed, dispatch pending */
    bool close_after;  /* close once the response is written */
    bool parse_error;
    bool in_trailers; /* chunked trailers: read and dropped, never request headers */
    bool linger;      /* the answer left part of the request unread: close by lingering */
    bool broken;      /* a write failed: closed from the timer, never inside the failing call */
    int error_status;
    const char *error_code;
    const char *error_msg;
    char error_text[80]; /* error_msg when it is formatted (the 413 with its limit) */
    size_t head_bytes;
    size_t linger_bytes;
    size_t stream_pending;
    int writes_in_flight;
    /* Write deadline: bytes written at once (uv_try_write) and handed to uv_write so far, the
     * delivered count (conn_delivered) seen at the last tick, and when it last moved (loop
     * time). */
    uint64_t sent_total;
    uint64_t queued_total;
    uint64_t flushed_mark;
    uint64_t progress_ms;
    bool stream_watch; /* the deadline is being watched (unflushed bytes were seen) */
    bool stream_sized; /* the stream's head declares its length: it ends by itself */
    uv_shutdown_t shut;
    struct http_conn *prev, *next; /* all connections, for shutdown */
    uint64_t deadline_ms;          /* whole-request deadline (loop time), 0: none */
    struct ip_count *ipc;          /* this connection's entry in the per-IP table */
    bool peer_trusted;             /* the peer is in TRUSTED_PROXIES (see conn_forwarded) */
    bool side;                     /* accepted on the side listener (http_server_listen_only) */
    char ip[48];                   /* the peer's address */
};

/* Open connections per client address, for MAX_CONNECTIONS_PER_IP. */
typedef struct ip_count {
    struct ip_count *next;
    size_t n;
    char ip[48];
} ip_count_t;

typedef struct write_req {
    uv_write_t w;
    http_conn_t *conn;
    sbuf_t *sb;         /* stream chunk, or NULL */
    bool ends_response; /* finishing this write completes the request */
    size_t bytes;
    char *copy; /* remainder of a partially written response, heap */
} write_req_t;

static uv_loop_t *loop_ref;
static uv_tcp_t server;
static bool server_open;
static uv_tcp_t side_server; /* http_server_listen_only */
static bool side_open;
static const char *side_pattern;
static bool shutting_down;
static void (*shutdown_done)(void);
static http_conn_t *conns;
static size_t nconns;
static uint64_t req_counter;
static llhttp_settings_t settings;
static size_t max_conns = DEFAULT_MAX_CONNECTIONS;
static size_t max_conns_per_ip = DEFAULT_MAX_CONNECTIONS_PER_IP;
static uint64_t request_timeout_ms = DEFAULT_REQUEST_TIMEOUT_S * 1000ull;
static uint64_t body_timeout_ms = BODY_TIMEOUT_MS;
static uint64_t stream_write_timeout_ms = DEFAULT_STREAM_WRITE_TIMEOUT_S * 1000ull;
static ip_count_t *ip_table[IP_BUCKETS];
static size_t ip_entries;
static uint64_t refused_total, refused_logged_at;

static void conn_close(http_conn_t *c);
static void conn_process(http_conn_t *c);
static void conn_read_start(http_conn_t *c);
static void conn_read_stop(http_conn_t *c);
static void conn_arm(http_conn_t *c, uint64_t ms);
static void conn_finish_request(http_conn_t *c);
static void req_free(http_req_t *req);
static void write_error_and_close(http_conn_t *c, int status, const char *code, const char *msg);
static void on_timer(uv_timer_t *t);
static void conn_linger(http_conn_t *c);
static void stream_watch(http_conn_t *c);
static void stream_drain_check(http_conn_t *c);
static void timer_at_most(http_conn_t *c, uint64_t ms);
static ip_count_t *ip_acquire(const char *ip);
static void ip_release(ip_count_t *e);
static void note_refused(const char *why, const char *ip);

uv_loop_t *http_loop(void)
{
    return loop_ref;
}

uint64_t http_now_ns(void)
{
    return uv_hrtime();
}

size_t http_server_conn_count(void)
{
    return nconns;
}

size_t http_server_ip_entries(void)
{
    return ip_entries;
}

/* ---- requests ---- */

/* Eight lower-case hex digits, as "%08x" writes them. */
static void hex8(char *out, uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 7; i >= 0; i--) {
        out[i] = digits[v & 15];
        v >>= 4;
    }
}

static http_req_t *req_new(http_conn_t *c)
{
    http_req_t *req = xcalloc(1, sizeof(*req));
    arena_init(&req->arena);
    req->conn = c;
    req->refs = 1;
    req->start_ns = uv_hrtime();
    uint64_t n = ++req_counter;
    hex8(req->id, (uint32_t)log_pid());
    hex8(req->id + 8, (uint32_t)n);
    req->id[16] = '\0';
    memcpy(req->client_ip, c->ip, sizeof(req->client_ip));
    req->keep_alive = true;
    return req;
}

void http_req_ref(http_req_t *req)
{
    req->refs++;
}

void http_req_unref(http_req_t *req)
{
    if (--req->refs == 0) req_free(req);
}

static void req_free(http_req_t *req)
{
    if (req->res_owned) {
        buf_free(req->res_owned);
        free(req->res_owned);
    }
    buf_free(&req->hbuf);
    arena_free(&req->arena);
    free(req->kept);
    free(req);
}

const char *http_req_header(const http_req_t *req, const char *name)
{
    for (int i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->headers[i].name, name) == 0) return req->headers[i].value;
    return NULL;
}

const char *http_req_query(http_req_t *req, const char *name)
{
    return url_query_get(&req->arena, req->query, name);
}

const char *http_req_cookie(http_req_t *req, const char *name)
{
    return url_cookie_get(&req->arena, http_req_header(req, "Cookie"), name);
}

void http_res_header(http_req_t *req, const char *name, const char *value)
{
    if (req->n_res_headers == req->cap_res_headers) {
        int cap = req->cap_res_headers ? req->cap_res_headers * 2 : 8;
        http_header_t *h = arena_alloc(&req->arena, (size_t)cap * sizeof(*h));
        if (req->n_res_headers)
            memcpy(h, req->res_headers, (size_t)req->n_res_headers * sizeof(*h));
        req->res_headers = h;
        req->cap_res_headers = cap;
    }
    req->res_headers[req->n_res_headers].name = arena_strdup(&req->arena, name);
    req->res_headers[req->n_res_headers].value = arena_strdup(&req->arena, value);
    req->n_res_headers++;
}

/* ---- response heads ---- */

static const char *status_text(int s)
{
    switch (s) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 411:
        return "Length Required";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 417:
        return "Expectation Failed";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    default:
        return "Unknown";
    }
}

/* The Date header changes once a second; format it once a second. */
static const char *http_date(void)
{
    static char cached[40];
    static time_t cached_at;
    time_t now = time(NULL);
    if (now != cached_at) {
        struct tm tm;
        gmtime_r(&now, &tm);
        strftime(cached, sizeof(cached), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        cached_at = now;
    }
    return cached;
}

static void add_cors(http_req_t *req, buf_t *h)
{
    const char *origin = http_req_header(req, "Origin");
    if (!origin || !config_origin_trusted(origin, strlen(origin))) return;
    buf_printf(h,
               "Access-Control-Allow-Origin: %s\r\nAccess-Control-Allow-Credentials: true\r\n"
               "Access-Control-Expose-Headers: X-Request-Id, Retry-After\r\nVary: Origin\r\n",
               origin);
}

static bool res_header_set(const http_req_t *req, const char *name)
{
    for (int i = 0; i < req->n_res_headers; i++)
        if (strcasecmp(req->res_headers[i].name, name) == 0) return true;
    return false;
}

/* v in decimal at the start of out (no terminator); returns its length. */
static size_t decimal(char *out, size_t cap, unsigned long long v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < sizeof(tmp));
    if (n > cap) n = cap;
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

/* Appends a header line "name: value\r\n". */
static void head_line(buf_t *h, const char *name, size_t nlen, const char *value)
{
    buf_append(h, name, nlen);
    buf_append(h, ": ", 2);
    buf_puts(h, value);
    buf_append(h, "\r\n", 2);
}
#define HEAD_LINE(h, lit, value) head_line((h), lit, sizeof(lit) - 1, (value))

/* Builds the head. content_length: the body length, HEAD_STREAM for a stream (no length,
 * connection closes), HEAD_NO_BODY for 1xx/204/304 (neither). The head is valid until the next
 * call: conn_write copies whatever the socket does not take at once, so one buffer serves every
 * answer (a head built per request cost an allocation, a copy and a printf per header). */
#define HEAD_STREAM (-1)
#define HEAD_NO_BODY (-2)
static char *build_head(http_req_t *req, int status, const char *ctype, long long content_length,
                        size_t *len_out)
{
    static buf_t h;
    buf_reset(&h);
    buf_reserve(&h, 512);
    char num[24];
    buf_append(&h, "HTTP/1.1 ", 9);
    buf_append(&h, num, decimal(num, sizeof(num), (unsigned long long)status));
    buf_putc(&h, ' ');
    buf_puts(&h, status_text(status));
    buf_append(&h, "\r\n", 2);
    HEAD_LINE(&h, "Date", http_date());
    HEAD_LINE(&h, "X-Request-Id", req->id);
    if (ctype && content_length != HEAD_NO_BODY) HEAD_LINE(&h, "Content-Type", ctype);
    if (content_length >= 0) {
        buf_append(&h, "Content-Length: ", 16);
        buf_append(&h, num, decimal(num, sizeof(num), (unsigned long long)content_length));
        buf_append(&h, "\r\n", 2);
    }
    buf_puts(&h, "X-Content-Type-Options: nosniff\r\n");
    /* no-store unless the handler chose its own caching (a content-hashed static file). */
    if (content_length != HEAD_STREAM && !res_header_set(req, "Cache-Control"))
        buf_puts(&h, "Cache-Control: no-store\r\n");
    add_cors(req, &h);
    for (int i = 0; i < req->n_res_headers; i++)
        head_line(&h, req->res_headers[i].name, strlen(req->res_headers[i].name),
                  req->res_headers[i].value);
    bool close = content_length == HEAD_STREAM || !req->keep_alive || shutting_down ||
                 (req->conn && req->conn->close_after);
    buf_puts(&h, close ? "Connection: close\r\n\r\n" : "Connection: keep-alive\r\n\r\n");
    *len_out = h.len;
    return h.data;
}

/* ---- writing ---- */

static void on_write_done(uv_write_t *w, int status)
{
    write_req_t *wr = container_of(w, write_req_t, w);
    http_conn_t *c = wr->conn;
    c->writes_in_flight--;
    if (wr->sb) {
        c->stream_pending -= wr->bytes;
        sbuf_unref(wr->sb);
    }
    free(wr->copy);
    bool ends = wr->ends_response;
    free(wr);
    if (c->state == CONN_CLOSING) return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    if (ends) {
        conn_finish_request(c);
        return;
    }
    if (c->state == CONN_STREAMING) stream_drain_check(c);
}

/* A write failed. The connection is closed from its timer on the next turn of the loop, never
 * inside the call that wrote: that caller (a handler replying, the stream hub in the middle of a
 * fan-out) still uses the request and its own state, and learns of the failure from
 * http_stream_write() returning -1 or from http_req_gone() later. Until then every further write
 * is dropped. */
static void conn_fail(http_conn_t *c)
{
    if (c->broken || c->state == CONN_CLOSING) return;
    c->broken = true;
    conn_read_stop(c);
    uv_timer_start(&c->timer, on_timer, 0, 0);
}

/* Bytes of the answers written on this connection that the client's side has received: given
 * to the kernel and acknowledged (SIOCOUTQ counts the send queue's unacknowledged bytes). The
 * write deadline watches this count, not only the worker's own queue: a reader slower than
 * the kernel's send buffer (megabytes) takes from that buffer for a long while before the
 * worker's queue moves, and it is reading all the same. */
static uint64_t conn_delivered(http_conn_t *c)
{
    uint64_t handed = c->sent_total + c->queued_total - c->tcp.write_queue_size;
#ifdef SIOCOUTQ
    uv_os_fd_t fd;
    int unacked = 0;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0 && ioctl(fd, SIOCOUTQ, &unacked) == 0 &&
        unacked > 0 && (uint64_t)unacked <= handed)
        handed -= (uint64_t)unacked;
#endif
    return handed;
}

/* Writes iovecs: as much as possible at once with uv_try_write, the rest with uv_write from a
 * heap copy (only the unwritten tail is copied, which is rare and small in practice). */
static void conn_write(http_conn_t *c, uv_buf_t *bufs, int n, sbuf_t *sb, bool ends)
{
    if (c->broken || c->state == CONN_CLOSING) return;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += bufs[i].len;
    int written = 0;
    if (c->writes_in_flight == 0) {
        written = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)n);
        if (written == UV_EAGAIN || written == UV_ENOSYS) written = 0;
        if (written < 0) {
            conn_fail(c);
            return;
        }
        c->sent_total += (size_t)written;
    }
    if ((size_t)written == total) {
        if (ends) conn_finish_request(c);
        return;
    }
    write_req_t *wr = xcalloc(1, sizeof(*wr));
    wr->conn = c;
    wr->ends_response = ends;
    size_t rest = total - (size_t)written;
    uv_buf_t one;
    if (sb && written == 0 && n == 1) {
        /* Stream chunk not touched yet: write straight from the shared buffer. */
        wr->sb = sbuf_ref(sb);
        wr->bytes = rest;
        c->stream_pending += rest;
        one = bufs[0];
    } else {
        wr->copy = xmalloc(rest);
        size_t skip = (size_t)written, off = 0;
        for (int i = 0; i < n; i++) {
            size_t l = bufs[i].len;
            if (skip >= l) {
                skip -= l;
                continue;
            }
            memcpy(wr->copy + off, bufs[i].base + skip, l - skip);
            off += l - skip;
            skip = 0;
        }
        if (sb) {
            /* Copied tail of a stream chunk: it still counts as pending stream bytes. */
            wr->bytes = rest;
            c->stream_pending += rest;
            wr->sb = sbuf_ref(sb);
        }
        one = uv_buf_init(wr->copy, (unsigned)rest);
    }
    /* The answer waits for the socket: read nothing more until it is written. */
    if (ends && c->state == CONN_WRITING) conn_read_stop(c);
    c->writes_in_flight++;
    c->queued_total += rest;
    if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &one, 1, on_write_done) != 0) {
        c->writes_in_flight--;
        if (wr->sb) {
            c->stream_pending -= wr->bytes;
            sbuf_unref(wr->sb);
        }
        free(wr->copy);
        free(wr);
        conn_fail(c);
        return;
    }
    if (c->state == CONN_WRITING) {
        c->flushed_mark = conn_delivered(c);
        conn_arm(c, stream_write_timeout_ms);
    }
    /* Only starts the watch: conn_write runs inside the owner's calls, which must not see the
     * connection close under them (the deadline closes from on_timer). */
    if (c->state == CONN_STREAMING && !c->stream_watch) stream_watch(c);
}

/* A route parameter whose name says it is a secret (":token") is never logged. */
static bool param_is_secret(const char *name, size_t len)
{
    for (size_t i = 0; i + 5 <= len; i++)
        if (strncasecmp(name + i, "token", 5) == 0) return true;
    return false;
}

static bool is_token_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_';
}

/* A path segment that holds a secret whatever the route: a run of 32 or more base64url
 * characters that is not a UUID (session, invite, reset and calendar feed tokens are 43),
 * wherever it sits in the segment. Catches a token sent to the wrong method or path, which no
 * route pattern names, and one with something stuck to it ("<token>.ics", "<token>+x",
 * "<token>%" that failed to decode, "x<token>"). */
static bool segment_is_token_like(const char *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        if (!is_token_char(s[i])) {
            i++;
            continue;
        }
        size_t start = i, dashes = 0;
        for (; i < len && is_token_char(s[i]); i++)
            dashes += s[i] == '-';
        size_t n = i - start;
        const char *r = s + start;
        bool uuid =
            n == 36 && dashes == 4 && r[8] == '-' && r[13] == '-' && r[18] == '-' && r[23] == '-';
        if (n >= 32 && !uuid) return true;
    }
    return false;
}

/* Walks the path and the matched pattern (if any) segment by segment, as router_match split
 * them; appends the loggable form to out (when not NULL). Returns how many segments it redacted. */
static int redact_path(const http_req_t *req, buf_t *out)
{
    const char *pp = req->route ? req->route->pattern : "";
    const char *sp = req->path;
    int redacted = 0;
    while (*sp) {
        if (*sp == '/') {
            if (out) buf_putc(out, '/');
            sp++;
            continue;
        }
        while (*pp == '/')
            pp++;
        size_t sl = strcspn(sp, "/"), pl = strcspn(pp, "/");
        if ((pl > 1 && pp[0] == ':' && param_is_secret(pp + 1, pl - 1)) ||
            segment_is_token_like(sp, sl)) {
            redacted++;
            if (out) buf_puts(out, "[redacted]");
        } else if (out) {
            buf_append(out, sp, sl);
        }
        sp += sl;
        pp += pl;
    }
    return redacted;
}

/* The path as the access log shows it: the segments of secret route parameters (":token") and
 * token-like segments read "[redacted]", and the query string is left out (verify-email and reset
 * links carry their token there). log_msg() escapes control characters, so a decoded %0D%0A
 * cannot forge a line. */
static const char *log_path(http_req_t *req)
{
    if (!req->path) return "-";
    if (redact_path(req, NULL) == 0) return req->path; /* the common case: nothing to copy */
    buf_t b = BUF_INIT;
    redact_path(req, &b);
    const char *out = arena_strndup(&req->arena, b.data ? b.data : "", b.len);
    buf_free(&b);
    return out;
}

static http_user_fn log_user;

void http_set_log_user(http_user_fn fn)
{
    log_user = fn;
}

static void log_request(http_req_t *req)
{
    double ms = (double)(uv_hrtime() - req->start_ns) / 1e6;
    metrics_observe(req->method_name, req->route ? req->route->pattern : NULL, req->status,
                    ms / 1e3);
    if (log_json) {
        /* Route pattern, not path: paths may carry tokens; no query, no headers, no emails. */
        if (log_level_current >= LOG_INFO)
            log_access(req->id, req->method_name, req->route ? req->route->pattern : NULL,
                       req->status, ms,
                       req->kept  ? req->kept_user
                       : log_user ? log_user(req)
                                  : NULL,
                       req->client_ip);
        return;
    }
    if (log_level_current >= LOG_INFO)
        log_access_text("%s %s %d %.1fms id=%s client=%s",
                        req->method_name ? req->method_name : "-", log_path(req), req->status, ms,
                        req->id, req->client_ip);
}

static bool reply_prologue(http_req_t *req, int status)
{
    if (req->replied) {
        log_error("request %s: second reply (%d) ignored", req->id, status);
        return false;
    }
    req->replied = true;
    req->status = status;
    if (!req->conn) {
        log_request(req);
        return false;
    }
    http_conn_t *c = req->conn;
    /* A body we did not read (answer before the body) cannot be skipped safely: close after,
     * lingering so the client reads this answer rather than a reset. */
    if (!req->body_done || c->parse_error) {
        req->keep_alive = false;
        c->linger = true;
    }
    if (!req->keep_alive || shutting_down) c->close_after = true;
    /* Reading stops only if the answer cannot be written at once (conn_write): stopping and
     * restarting it around a write that completes costs two epoll_ctl calls per request. */
    c->state = CONN_WRITING;
    return true;
}

static http_body_filter_fn body_filter;

void http_set_body_filter(http_body_filter_fn fn)
{
    body_filter = fn;
}

void http_reply(http_req_t *req, int status, const char *ctype, const char *body, size_t len)
{
    if (!reply_prologue(req, status)) return;
    bool json = len > 0 && ctype && strncmp(ctype, "application/json", 16) == 0;
    if (body_filter && !req->body_plain && json) body = body_filter(req, body, len, &len);
    if (json && !req->body_compact) {
        /* Every JSON answer goes out compact, PostgreSQL's renderings included (core/json.h);
         * a body that already is costs one scan and no copy. */
        size_t at = json_space_at(body, len);
        if (at < len) {
            char *copy = arena_alloc(&req->arena, len);
            memcpy(copy, body, at);
            len = at + json_compact(copy + at, body + at, len - at);
            body = copy;
        }
    }
    bool no_body = status == 204 || status == 304 || (status >= 100 && status < 200);
    size_t hlen;
    char *head = build_head(req, status, ctype, no_body ? HEAD_NO_BODY : (long long)len, &hlen);
    uv_buf_t bufs[2] = {uv_buf_init(head, (unsigned)hlen),
                        uv_buf_init((char *)body, (unsigned)len)};
    int n = (no_body || req->head_only || len == 0) ? 1 : 2;
    conn_write(req->conn, bufs, n, NULL, true);
}

void http_reply_buf(http_req_t *req, int status, const char *ctype, buf_t *body)
{
    req->res_owned = xmalloc(sizeof(buf_t));
    *req->res_owned = *body;
    body->data = NULL;
    body->len = body->cap = 0;
    http_reply(req, status, ctype, req->res_owned->data ? req->res_owned->data : "",
               req->res_owned->len);
}

void http_reply_jsonn(http_req_t *req, int status, const char *json, size_t len)
{
    char *copy = arena_strndup(&req->arena, json, len);
    http_reply(req, status, "application/json; charset=utf-8", copy, len);
}

void http_reply_json(http_req_t *req, int status, const char *json)
{
    http_reply_jsonn(req, status, json, strlen(json));
}

void http_reply_empty(http_req_t *req, int status)
{
    http_reply(req, status, NULL, "", 0);
}

void http_reply_head(http_req_t *req, int status, const char *ctype, uint64_t length)
{
    if (!req->head_only || length > (uint64_t)LLONG_MAX) {
        /* Only a HEAD may have a head without its body: anything else would hang the client. */
        log_error("request %s: http_reply_head on a request that is not HEAD", req->id);
        http_reply_error(req, 500, "INTERNAL", "Internal error");
        return;
    }
    if (!reply_prologue(req, status)) return;
    size_t hlen;
    char *head = build_head(req, status, ctype, (long long)length, &hlen);
    uv_buf_t b = uv_buf_init(head, (unsigned)hlen);
    conn_write(req->conn, &b, 1, NULL, true);
}

void http_reply_error_details(http_req_t *req, int status, const char *code, const char *message,
                              const char *details_json)
{
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"error\":{\"code\":");
    buf_json_str(&b, code);
    buf_puts(&b, ",\"message\":");
    buf_json_str(&b, message);
    if (details_json) {
        buf_puts(&b, ",\"details\":");
        buf_puts(&b, details_json);
    }
    buf_puts(&b, "}}");
    http_reply_buf(req, status, "application/json; charset=utf-8", &b);
}

void http_reply_error(http_req_t *req, int status, const char *code, const char *message)
{
    http_reply_error_details(req, status, code, message, NULL);
}

void http_reply_rate_limited(http_req_t *req, const char *code, const char *message,
                             int retry_after)
{
    char ra[24];
    snprintf(ra, sizeof(ra), "%d", retry_after);
    http_res_header(req, "Retry-After", ra);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"error\":{\"code\":");
    buf_json_str(&b, code);
    buf_puts(&b, ",\"message\":");
    buf_json_str(&b, message);
    buf_printf(&b, "},\"retryAfterSeconds\":%d}", retry_after);
    http_reply_buf(req, 429, "application/json; charset=utf-8", &b);
}

void http_reply_redirect(http_req_t *req, int status, const char *location)
{
    http_res_header(req, "Location", location);
    http_reply(req, status, NULL, "", 0);
}

/* ---- streams ---- */

void http_stream_open(http_req_t *req, int status, const char *ctype)
{
    if (!reply_prologue(req, status)) return;
    http_conn_t *c = req->conn;
    req->streaming = true;
    req->keep_alive = false;
    c->close_after = true;
    size_t hlen;
    char *head = build_head(req, status, ctype, HEAD_STREAM, &hlen);
    c->state = CONN_STREAMING;
    c->stream_sized = false;
    for (int i = 0; i < req->n_res_headers; i++)
        if (strcasecmp(req->res_headers[i].name, "Content-Length") == 0) c->stream_sized = true;
    uv_timer_stop(&c->timer);
    /* Anything a client pipelines after a stream request is never answered. */
    buf_free(&c->in);
    c->in_off = 0;
    uv_buf_t b = uv_buf_init(head, (unsigned)hlen);
    conn_write(c, &b, 1, NULL, false);
    /* Keep reading (into a small buffer) to notice the client going away. */
    if (c->state == CONN_STREAMING) conn_read_start(c);
    /* An event stream that opens while the server drains (its request was under way at the
     * signal) ends like those open at the signal: closed, from the timer on the next turn, so
     * its owner finishes setting it up first. */
    if (c->state == CONN_STREAMING && shutting_down && !c->stream_sized) timer_at_most(c, 0);
}

int http_stream_write(http_req_t *req, sbuf_t *b, size_t max_pending)
{
    http_conn_t *c = req->conn;
    if (!c || c->state != CONN_STREAMING || c->broken) return -1;
    if (c->stream_pending + b->len > max_pending && c->stream_pending > 0) return -1;
    uv_buf_t ub = uv_buf_init(b->data, (unsigned)b->len);
    /* A failing write only marks the connection broken (conn_fail): c, req and the caller's
     * stream all stay valid until the caller returns to the loop. */
    conn_write(c, &ub, 1, b, false);
    return c->broken ? -1 : 0;
}

void http_stream_sndbuf(http_req_t *req, int bytes)
{
    http_conn_t *c = req->conn;
    if (!c || c->state != CONN_STREAMING || bytes <= 0) return;
    /* Best effort: a socket that refuses keeps the kernel's default. */
    (void)uv_send_buffer_size((uv_handle_t *)&c->tcp, &bytes);
}

/* Runs on_timer within ms at the latest: a stream's timer serves its write deadline, its drain
 * callback and the release of its head, so an earlier due time is kept. */
static void timer_at_most(http_conn_t *c, uint64_t ms)
{
    if (uv_is_active((uv_handle_t *)&c->timer) && uv_timer_get_due_in(&c->timer) <= ms) return;
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

void http_stream_release_head(http_req_t *req)
{
    http_conn_t *c = req->conn;
    if (!c || c->state != CONN_STREAMING || req->kept) return;
    req->release_head = true;
    /* A 0 ms timer runs on_timer on the next iteration, when no callback of the stream's owner
     * is on the stack. */
    timer_at_most(c, 0);
}

/* The write deadline of a streaming answer (see the top of this file). Called when unflushed
 * bytes may have appeared (conn_write) and on every tick; closes the connection only from a
 * tick, never inside a write of the stream's owner. */
static void stream_watch(http_conn_t *c)
{
    size_t unflushed = c->tcp.write_queue_size;
    if (unflushed == 0 && c->stream_pending == 0) {
        c->stream_watch = false; /* the client has everything: nothing to police */
        return;
    }
    uint64_t now = uv_now(loop_ref);
    uint64_t flushed = conn_delivered(c);
    if (!c->stream_watch || flushed != c->flushed_mark) {
        c->stream_watch = true;
        c->flushed_mark = flushed;
        c->progress_ms = now;
    } else if (now - c->progress_ms >= stream_write_timeout_ms) {
        log_info("%s %s stream closed: nothing read for %llu s id=%s client=%s",
                 c->req && c->req->method_name ? c->req->method_name : "-",
                 c->req ? log_path(c->req) : "-",
                 (unsigned long long)(stream_write_timeout_ms / 1000), c->req ? c->req->id : "-",
                 c->req ? c->req->client_ip : c->ip);
        conn_close(c);
        return;
    }
    uint64_t tick = stream_write_timeout_ms / 4;
    timer_at_most(c, tick < 100 ? 100 : tick);
}

/* Runs the stream's drain callback when its unflushed bytes are down to its low-water mark. */
static void stream_drain_check(http_conn_t *c)
{
    http_req_t *req = c->req;
    if (!req || !req->on_drain || c->broken || c->stream_pending > req->drain_low) return;
    http_req_cb cb = req->on_drain;
    req->on_drain = NULL;
    http_req_ref(req);
    cb(req);
    http_req_unref(req);
}

void http_stream_on_drain(http_req_t *req, size_t low_water, http_req_cb cb)
{
    http_conn_t *c = req->conn;
    if (!c || c->state != CONN_STREAMING) return;
    req->on_drain = cb;
    req->drain_low = low_water;
    /* Already drained: the callback runs on the next loop turn, never inside this call. */
    if (cb && c->stream_pending <= low_water) timer_at_most(c, 0);
}

/* Frees the arena of a streaming request, keeping the path and the log user (see
 * http_stream_release_head). */
static void req_release_head(http_req_t *req)
{
    req->release_head = false;
    const char *path = req->path ? req->path : "-";
    const char *user = log_user ? log_user(req) : NULL;
    size_t pl = strlen(path), ul = user ? strlen(user) : 0, bytes;
    if (!size_add3(pl, ul, 2, &bytes)) xoverflow("req_release_head");
    char *kept = xmalloc(bytes);
    memcpy(kept, path, pl + 1);
    if (user) memcpy(kept + pl + 1, user, ul + 1);
    arena_free(&req->arena);
    arena_init(&req->arena);
    req->kept = kept;
    req->path = kept;
    req->kept_user = user ? kept + pl + 1 : NULL;
    req->query = NULL;
    req->headers = NULL;
    req->nheaders = 0;
    req->body = NULL;
    req->body_len = 0;
    memset(req->params, 0, sizeof(req->params));
    req->nparams = 0;
    req->caller = NULL;
    req->res_headers = NULL;
    req->n_res_headers = req->cap_res_headers = 0;
    req->cur_header_name = NULL;
    req->url_raw = NULL;
}

size_t http_stream_pending(const http_req_t *req)
{
    return req->conn ? req->conn->stream_pending : 0;
}

void http_stream_close(http_req_t *req)
{
    http_conn_t *c = req->conn;
    if (!c) return;
    req->on_gone = NULL;
    /* What the kernel holds still goes out; what is queued in libuv is dropped (http.h). */
    conn_close(c);
}

/* ---- request bodies ---- */

void http_req_read_body(http_req_t *req, http_body_chunk_cb on_chunk, http_req_cb on_end)
{
    http_conn_t *c = req->conn;
    if (!c) return;
    req->on_body_chunk = on_chunk;
    req->on_body_end = on_end;
    req->body_streamed = true;
    if (req->body_done) {
        /* The request had no body (no Content-Length, or 0): its message is already complete,
         * so on_end runs now (from conn_process). Parsing on would read the next pipelined
         * request into this one: it leaked, and on_end never ran. */
        c->state = CONN_BODY;
        c->msg_complete = true;
        c->again = true;
        conn_process(c);
        return;
    }
    if (req->want_continue) {
        static char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        uv_buf_t b = uv_buf_init(cont, sizeof(cont) - 1);
        conn_write(c, &b, 1, NULL, false);
        req->want_continue = false;
    }
    c->state = CONN_BODY;
    c->head_ready = false;
    llhttp_resume(&c->parser);
    conn_arm(c, body_timeout_ms);
    conn_read_start(c);
    c->again = true;
    conn_process(c);
}

void http_req_pause_body(http_req_t *req)
{
    if (!req->conn) return;
    req->conn->body_paused = true;
    conn_read_stop(req->conn);
}

void http_req_resume_body(http_req_t *req)
{
    http_conn_t *c = req->conn;
    if (!c || !c->body_paused) return;
    c->body_paused = false;
    conn_read_start(c);
    conn_process(c);
}

/* ---- llhttp callbacks ---- */

static http_conn_t *conn_of(llhttp_t *p)
{
    return (http_conn_t *)p->data;
}

static int head_limit(http_conn_t *c, size_t len)
{
    c->head_bytes += len;
    if (c->head_bytes > HTTP_HEAD_LIMIT) {
        c->error_status = 431;
        c->error_code = "PAYLOAD_TOO_LARGE";
        c->error_msg = "Request head too large";
        return -1;
    }
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    http_conn_t *c = conn_of(p);
    c->req = req_new(c);
    c->state = CONN_HEAD;
    c->head_bytes = 0;
    c->in_trailers = false;
    c->deadline_ms = uv_now(loop_ref) + request_timeout_ms;
    conn_arm(c, HEAD_TIMEOUT_MS);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t len)
{
    http_conn_t *c = conn_of(p);
    if (head_limit(c, len)) return -1;
    buf_append(&c->req->hbuf, at, len);
    return 0;
}

static int on_url_complete(llhttp_t *p)
{
    http_req_t *req = conn_of(p)->req;
    req->url_raw = arena_strndup(&req->arena, req->hbuf.data ? req->hbuf.data : "", req->hbuf.len);
    buf_reset(&req->hbuf);
    return 0;
}

/* llhttp reports chunked trailers through the header callbacks after on_headers_complete. They
 * count against the head limit and are dropped: a field no proxy saw (X-Organization-Id,
 * Cookie) must never become a request header after routing and the guard looked at the head. */
static int on_header_field(llhttp_t *p, const char *at, size_t len)
{
    http_conn_t *c = conn_of(p);
    if (head_limit(c, len)) return -1;
    if (c->in_trailers) return 0;
    buf_append(&c->req->hbuf, at, len);
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    http_conn_t *c = conn_of(p);
    if (c->in_trailers) return 0;
    http_req_t *req = c->req;
    req->cur_header_name_len = req->hbuf.len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t len)
{
    http_conn_t *c = conn_of(p);
    if (head_limit(c, len)) return -1;
    if (c->in_trailers) return 0;
    buf_append(&c->req->hbuf, at, len);
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    http_conn_t *c = conn_of(p);
    if (c->in_trailers) return 0;
    http_req_t *req = c->req;
    if (req->nheaders == MAX_HEADERS) {
        c->error_status = 431;
        c->error_code = "PAYLOAD_TOO_LARGE";
        c->error_msg = "Too many header fields";
        return -1;
    }
    if (req->nheaders % 16 == 0) {
        http_header_t *h = arena_alloc(&req->arena, (size_t)(req->nheaders + 16) * sizeof(*h));
        if (req->nheaders) memcpy(h, req->headers, (size_t)req->nheaders * sizeof(*h));
        req->headers = h;
    }
    const char *d = req->hbuf.data ? req->hbuf.data : "";
    size_t nl = req->cur_header_name_len;
    const char *v = d + nl;
    size_t vl = req->hbuf.len - nl;
    while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
        vl--;
    req->headers[req->nheaders].name = arena_strndup(&req->arena, d, nl);
    req->headers[req->nheaders].value = arena_strndup(&req->arena, v, vl);
    req->nheaders++;
    buf_reset(&req->hbuf);
    return 0;
}

static const char *method_str(int m)
{
    return llhttp_method_name((llhttp_method_t)m);
}

/* Body limit of the request: its route's, or NO_ROUTE_BODY_LIMIT for OPTIONS and unrouted paths
 * (their bodies are read only to be discarded). */
static size_t body_limit_of(const http_req_t *req)
{
    if (!req->route) return NO_ROUTE_BODY_LIMIT;
    return req->route->body_limit ? req->route->body_limit : HTTP_JSON_LIMIT;
}

/* application/json, in any case, with or without parameters (charset). */
static bool content_type_is_json(const char *ct)
{
    if (!ct) return false;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, "application/json", 16) != 0) return false;
    ct += 16;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    return *ct == '\0' || *ct == ';';
}

void http_size_text(uint64_t bytes, char *out, size_t cap)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    for (int i = 0; i < 3; i++) {
        uint64_t unit = 1ULL << (10 * (3 - i));
        if (bytes >= unit && bytes % unit == 0) {
            snprintf(out, cap, "%llu %s", (unsigned long long)(bytes / unit), units[i]);
            return;
        }
    }
    snprintf(out, cap, "%llu bytes", (unsigned long long)bytes);
}

static int refuse_too_large(http_conn_t *c)
{
    char limit[HTTP_SIZE_TEXT_MAX];
    http_size_text(body_limit_of(c->req), limit, sizeof(limit));
    snprintf(c->error_text, sizeof(c->error_text), "Request body too large (limit %s)", limit);
    c->error_status = 413;
    c->error_code = "PAYLOAD_TOO_LARGE";
    c->error_msg = c->error_text;
    return -1;
}

/* Keeps the caller's X-Request-Id (a proxy's or a client's, for tracing a request through
 * several services) when it is short and of safe characters only; else ours stays. */
static void adopt_request_id(http_req_t *req)
{
    const char *in = http_req_header(req, "X-Request-Id");
    if (!in) return;
    size_t n = strlen(in);
    if (n == 0 || n > HTTP_REQUEST_ID_MAX) return;
    for (size_t i = 0; i < n; i++) {
        char ch = in[i];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == ':';
        if (!ok) return;
    }
    memcpy(req->id, in, n + 1);
}

/* The request's X-Forwarded-For lines joined with ", " in order (as one list), or NULL. */
static const char *forwarded_for(http_req_t *req, size_t *len)
{
    const char *one = NULL;
    int n = 0;
    for (int i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->headers[i].name, "X-Forwarded-For") == 0) {
            one = req->headers[i].value;
            n++;
        }
    if (n <= 1) {
        *len = one ? strlen(one) : 0;
        return one;
    }
    buf_t b = BUF_INIT;
    for (int i = 0; i < req->nheaders; i++)
        if (strcasecmp(req->headers[i].name, "X-Forwarded-For") == 0) {
            if (b.len) buf_puts(&b, ", ");
            buf_puts(&b, req->headers[i].value);
        }
    *len = b.len;
    const char *out = arena_strndup(&req->arena, b.data ? b.data : "", b.len);
    buf_free(&b);
    return out;
}

/* Behind a trusted proxy (TRUSTED_PROXIES), the client is the one X-Forwarded-For names, for
 * everything keyed by client address: rate limits, the per-IP connection cap and the logs. From
 * any other peer the header is ignored. The proxy's connection is counted under the client of
 * the request it carries, for as long as that request runs (a proxy reuses its upstream
 * connections for other clients). Returns -1 when that client is over MAX_CONNECTIONS_PER_IP:
 * the request is refused as a connection over the cap would be. */
static int conn_forwarded(http_conn_t *c, http_req_t *req)
{
    if (!c->peer_trusted) return 0;
    size_t len;
    const char *xff = forwarded_for(req, &len);
    char client[NETADDR_TEXT_MAX];
    if (xff && netaddr_pick_client(netaddr_trusted(), xff, len, client, sizeof(client)))
        snprintf(req->client_ip, sizeof(req->client_ip), "%s", client);
    if (c->ipc) { /* not released at the end of the last request: a refused or aborted one */
        ip_release(c->ipc);
        c->ipc = NULL;
    }
    if (!(c->ipc = ip_acquire(req->client_ip))) {
        note_refused("MAX_CONNECTIONS_PER_IP", req->client_ip);
        http_res_header(req, "Retry-After", "1");
        c->error_status = 503;
        c->error_code = "UNAVAILABLE";
        c->error_msg = "Too many connections";
        return -1;
    }
    return 0;
}

static int on_headers_complete(llhttp_t *p)
{
    http_conn_t *c = conn_of(p);
    http_req_t *req = c->req;
    c->in_trailers = true; /* any header callback from here on is a chunked trailer */
    buf_free(&req->hbuf);
    req->method = p->method;
    req->method_name = method_str(p->method);
    adopt_request_id(req);
    req->head_only = p->method == HTTP_M_HEAD;
    req->keep_alive = llhttp_should_keep_alive(p);
    if (conn_forwarded(c, req) != 0) return -1;
    const char *url = req->url_raw ? req->url_raw : "/";
    const char *q = strchr(url, '?');
    size_t plen = q ? (size_t)(q - url) : strlen(url);
    req->query = q ? q + 1 : NULL;
    char *path = url_decode(&req->arena, url, plen, false);
    if (!path || path[0] != '/') {
        c->error_status = 400;
        c->error_code = "VALIDATION_ERROR";
        c->error_msg = "Malformed request target";
        req->path = path ? path : url;
        return -1;
    }
    req->path = path;
    if (p->flags & F_CHUNKED) {
        req->has_content_length = false;
    } else {
        req->has_content_length = true;
        req->content_length = p->content_length;
    }
    const char *expect = http_req_header(req, "Expect");
    if (expect) {
        if (strcasecmp(expect, "100-continue") != 0) {
            c->error_status = 417;
            c->error_code = "VALIDATION_ERROR";
            c->error_msg = "Unsupported Expect header";
            return -1;
        }
        req->want_continue = true;
    }
    /* CORS preflight and routing are decided on the head, so oversized, misrouted or mistyped
     * bodies are refused before they are read. A declared length over the limit is refused on
     * every path, routed or not, so no later size computation ever sees it. */
    bool has_body = (p->flags & F_CHUNKED) || p->content_length > 0;
    const route_t *r = NULL;
    if (req->method != HTTP_M_OPTIONS) {
        int status = 0;
        const char *allow = NULL;
        r = router_match(req, &status, &allow);
        if (c->side && r && strcmp(r->pattern, side_pattern) != 0)
            r = req->route = NULL;
        else if (!r && status == 405 && !c->side)
            http_res_header(req, "Allow", allow);
    }
    size_t limit = body_limit_of(req);
    if (req->has_content_length && req->content_length > (uint64_t)limit)
        return refuse_too_large(c);
    if (!r) return 0; /* answered at message complete (body, if any, is small and discarded) */
    if (has_body && !(r->flags & ROUTE_STREAM_BODY) &&
        !content_type_is_json(http_req_header(req, "Content-Type"))) {
        c->error_status = 415;
        c->error_code = "UNSUPPORTED_MEDIA_TYPE";
        c->error_msg = "Request bodies must be application/json";
        return -1;
    }
    if (r->flags & ROUTE_STREAM_BODY) {
        if (has_body) {
            c->head_ready = true;
            return HPE_PAUSED;
        }
        req->body_done = true;
    }
    if (req->want_continue && has_body) {
        static char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        uv_buf_t b = uv_buf_init(cont, sizeof(cont) - 1);
        conn_write(c, &b, 1, NULL, false);
        req->want_continue = false;
    }
    c->state = CONN_BODY;
    conn_arm(c, body_timeout_ms);
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t len)
{
    http_conn_t *c = conn_of(p);
    http_req_t *req = c->req;
    conn_arm(c, body_timeout_ms);
    if (req->body_streamed) {
        /* A streamed body counts against the same limit as a buffered one: a chunked upload
         * has no declared length to refuse at head time. body_len counts, nothing is kept. */
        size_t used;
        if (!size_add(req->body_len, len, &used) || used > body_limit_of(req))
            return refuse_too_large(c);
        req->body_len = used;
        if (req->replied || !req->on_body_chunk) return 0; /* handler gave up: discard */
        http_req_ref(req);
        int rc = req->on_body_chunk(req, at, len);
        bool gone = http_req_gone(req);
        http_req_unref(req);
        if (gone) return HPE_USER;
        if (rc < 0) req->on_body_chunk = NULL;
        return 0;
    }
    /* Every size here derives from client input: checked arithmetic only (core/checked.h). */
    size_t limit = body_limit_of(req), used, need;
    if (!size_add(req->body_len, len, &used) || used > limit) return refuse_too_large(c);
    if (!size_add(used, 1, &need)) return refuse_too_large(c);
    if (need > req->body_cap) {
        size_t cap = req->body_cap ? req->body_cap : 1024;
        while (cap < need)
            if (!size_mul(cap, 2, &cap)) return refuse_too_large(c);
        /* With a declared length (already checked against the limit) allocate exactly that. */
        size_t declared, exact;
        if (req->has_content_length && size_from_u64(req->content_length, limit, &declared) &&
            size_add(declared, 1, &exact) && exact >= need && cap > exact)
            cap = exact;
        char *nb = arena_alloc(&req->arena, cap);
        if (req->body_len) memcpy(nb, req->body, req->body_len);
        req->body = nb;
        req->body_cap = cap;
    }
    memcpy(req->body + req->body_len, at, len);
    req->body_len += len;
    req->body[req->body_len] = '\0';
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    http_conn_t *c = conn_of(p);
    c->req->body_done = true;
    c->req->keep_alive = c->req->keep_alive && llhttp_should_keep_alive(p);
    c->msg_complete = true;
    return HPE_PAUSED;
}

/* ---- dispatch ---- */

static void reply_preflight(http_req_t *req)
{
    const char *origin = http_req_header(req, "Origin");
    if (origin && config_origin_trusted(origin, strlen(origin))) {
        http_res_header(req, "Access-Control-Allow-Methods",
                        "GET, POST, PUT, PATCH, DELETE, OPTIONS");
        const char *asked = http_req_header(req, "Access-Control-Request-Headers");
        http_res_header(req, "Access-Control-Allow-Headers",
                        asked ? asked : "Content-Type, X-Organization-Id, X-Client-Key");
        http_res_header(req, "Access-Control-Max-Age", "600");
    }
    http_reply_empty(req, 204);
}

static void dispatch(http_conn_t *c)
{
    http_req_t *req = c->req;
    c->state = CONN_HANDLING;
    uv_timer_stop(&c->timer);
    if (req->method == HTTP_M_OPTIONS && !c->side) {
        reply_preflight(req);
        return;
    }
    if (!req->route) {
        bool is405 = false;
        for (int i = 0; i < req->n_res_headers; i++)
            if (strcmp(req->res_headers[i].name, "Allow") == 0) is405 = true;
        if (is405)
            http_reply_error(req, 405, "METHOD_NOT_ALLOWED", "Method not allowed");
        else
            http_reply_error(req, 404, "NOT_FOUND", "Route not found");
        return;
    }
    http_req_ref(req);
    router_dispatch(req);
    http_req_unref(req);
}

/* Closing, or lingering after the last answer: nothing more is parsed or dispatched. */
static bool conn_finished(const http_conn_t *c)
{
    return c->state == CONN_CLOSING || c->state == CONN_LINGER;
}

/* Parses what is buffered as far as the connection's state allows. Re-entrant calls (a reply
 * finishing synchronously inside a handler) only ask the running loop to go round again. */
static void conn_process(http_conn_t *c)
{
    if (c->in_process) {
        c->again = true;
        return;
    }
    c->in_process = true;
    do {
        c->again = false;
        if (conn_finished(c)) break;
        if (c->msg_complete && c->state != CONN_HANDLING && c->state != CONN_WRITING &&
            c->state != CONN_STREAMING) {
            c->msg_complete = false;
            if (c->req->body_streamed) {
                http_req_t *req = c->req;
                c->state = CONN_HANDLING;
                uv_timer_stop(&c->timer);
                http_req_ref(req);
                if (req->on_body_end && !req->replied) req->on_body_end(req);
                http_req_unref(req);
            } else {
                dispatch(c);
            }
            continue;
        }
        if (c->head_ready && c->state == CONN_HEAD) {
            http_req_t *req = c->req;
            c->state = CONN_HANDLING;
            uv_timer_stop(&c->timer);
            http_req_ref(req);
            router_dispatch(req);
            http_req_unref(req);
            continue;
        }
        bool can_parse = c->state == CONN_IDLE || c->state == CONN_HEAD ||
                         (c->state == CONN_BODY && !c->body_paused);
        size_t avail = c->in.len - c->in_off;
        if (!can_parse || avail == 0) break;
        const char *start = c->in.data + c->in_off;
        enum llhttp_errno err = llhttp_execute(&c->parser, start, avail);
        if (err == HPE_OK) {
            c->in_off += avail;
        } else if (err == HPE_PAUSED) {
            const char *pos = llhttp_get_error_pos(&c->parser);
            c->in_off += (size_t)(pos - start);
            if (c->msg_complete) llhttp_resume(&c->parser);
            c->again = true;
        } else if (!conn_finished(c)) {
            if (!c->error_status) {
                c->error_status = 400;
                c->error_code = "VALIDATION_ERROR";
                c->error_msg = "Malformed HTTP request";
            }
            if (err == HPE_USER && c->req && http_req_gone(c->req)) break;
            write_error_and_close(c, c->error_status, c->error_code, c->error_msg);
            break;
        }
        if (c->in_off == c->in.len) {
            c->in.len = 0;
            c->in_off = 0;
        }
    } while (c->again && !conn_finished(c));
    c->in_process = false;
    if (c->state == CONN_CLOSING) return;
    /* Compact, and give the memory back whenever nothing is left in it: idle and streaming
     * connections stay small, and so do requests waiting for their handler (a burst of stream
     * opens queued on the database held 16 KiB each, and the heap kept the high-water mark). */
    if (c->in_off > 0) {
        buf_consume(&c->in, c->in_off);
        c->in_off = 0;
    }
    if ((c->in.len == 0 && (c->state == CONN_IDLE || c->state == CONN_STREAMING ||
                            c->state == CONN_HANDLING || c->state == CONN_WRITING)) ||
        c->state == CONN_LINGER)
        buf_free(&c->in);
    bool want_read = c->state == CONN_IDLE || c->state == CONN_HEAD || c->state == CONN_LINGER ||
                     (c->state == CONN_BODY && !c->body_paused) || c->state == CONN_STREAMING ||
                     ((c->state == CONN_HANDLING) && c->in.len < PIPELINE_CAP && !c->head_ready);
    if (want_read)
        conn_read_start(c);
    else
        conn_read_stop(c);
}

static void write_error_and_close(http_conn_t *c, int status, const char *code, const char *msg)
{
    if (!c->req) c->req = req_new(c);
    http_req_t *req = c->req;
    c->parse_error = true;
    req->keep_alive = false;
    if (req->replied) {
        conn_close(c);
        return;
    }
    /* The owner of a streamed body (a storage writer behind it) tears down before core/http
     * answers in its place: this request ends without the owner's answer (http.h). */
    http_req_cb gone = req->on_gone;
    req->on_gone = NULL;
    if (gone) gone(req);
    c->state = CONN_HANDLING;
    http_reply_error(req, status, code, msg);
}

static void conn_finish_request(http_conn_t *c)
{
    http_req_t *req = c->req;
    if (req) {
        log_request(req);
        c->req = NULL;
        req->conn = NULL;
        http_req_unref(req);
    }
    if (c->peer_trusted && c->ipc) { /* counted per forwarded request (conn_forwarded) */
        ip_release(c->ipc);
        c->ipc = NULL;
    }
    if (c->close_after || shutting_down) {
        if (c->linger && !shutting_down)
            conn_linger(c);
        else
            conn_close(c);
        return;
    }
    c->state = CONN_IDLE;
    c->head_ready = false;
    c->body_paused = false;
    conn_arm(c, IDLE_TIMEOUT_MS);
    c->again = true;
    conn_process(c);
}

/* ---- socket I/O ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
    (void)suggested;
    http_conn_t *c = container_of((uv_tcp_t *)h, http_conn_t, tcp);
    if (c->state == CONN_STREAMING || c->state == CONN_LINGER) {
        /* Streams only need to notice EOF and drop what arrives, lingering connections drop
         * everything: one shared scratch buffer serves them all, so they own no input memory. */
        static char scratch[64 * 1024];
        *out = uv_buf_init(scratch, sizeof(scratch));
        return;
    }
    buf_reserve(&c->in, READ_CHUNK);
    *out = uv_buf_init(c->in.data + c->in.len, (unsigned)(c->in.cap - c->in.len - 1));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    (void)b;
    http_conn_t *c = container_of((uv_tcp_t *)s, http_conn_t, tcp);
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0) return;
    if (c->state == CONN_STREAMING) return; /* nothing is expected from an SSE client */
    if (c->state == CONN_LINGER) {
        c->linger_bytes += (size_t)nread;
        if (c->linger_bytes > LINGER_MAX_BYTES) conn_close(c);
        return;
    }
    c->in.len += (size_t)nread;
    c->in.data[c->in.len] = '\0';
    if (c->state == CONN_IDLE) conn_arm(c, HEAD_TIMEOUT_MS);
    conn_process(c);
}

static void conn_read_start(http_conn_t *c)
{
    if (c->reading || c->state == CONN_CLOSING || c->broken) return;
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0) c->reading = true;
}

static void conn_read_stop(http_conn_t *c)
{
    if (!c->reading) return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
}

static void on_timer(uv_timer_t *t)
{
    http_conn_t *c = container_of(t, http_conn_t, timer);
    if (c->broken) {
        conn_close(c);
        return;
    }
    switch (c->state) {
    case CONN_HEAD:
    case CONN_BODY:
        if (c->req && !c->req->replied) {
            write_error_and_close(c, 408, "VALIDATION_ERROR", "Request timed out");
            return;
        }
        conn_close(c);
        return;
    case CONN_WRITING: {
        /* Progress since the last tick (or the write) buys another deadline. */
        uint64_t flushed = conn_delivered(c);
        if (flushed != c->flushed_mark) {
            c->flushed_mark = flushed;
            conn_arm(c, stream_write_timeout_ms);
            return;
        }
        conn_close(c);
        return;
    }
    case CONN_IDLE:
    case CONN_LINGER:
        conn_close(c);
        return;
    case CONN_STREAMING:
        if (shutting_down && !c->stream_sized) { /* opened during the drain (http_stream_open) */
            conn_close(c);
            return;
        }
        if (c->req && c->req->release_head) req_release_head(c->req);
        stream_drain_check(c);
        if (c->state == CONN_STREAMING) stream_watch(c);
        return;
    default:
        return;
    }
}

static void conn_arm(http_conn_t *c, uint64_t ms)
{
    if (c->state == CONN_CLOSING || c->broken) return;
    /* Head and buffered body share one deadline from the request's first byte: each read
     * re-arms the per-read timeout, so without it a body trickled one byte at a time would hold
     * the connection (and its buffer) forever. Streamed bodies (uploads) are exempt: they may
     * be large and slow, and only the per-read timeout applies. */
    if (c->deadline_ms && (c->state == CONN_HEAD || c->state == CONN_BODY) &&
        !(c->req && c->req->body_streamed)) {
        uint64_t now = uv_now(loop_ref);
        uint64_t left = c->deadline_ms > now ? c->deadline_ms - now : 0;
        if (left < ms) ms = left;
    }
    uv_timer_start(&c->timer, on_timer, ms, 0);
}

static uint32_t ip_hash(const char *ip)
{
    return fnv1a(ip) % IP_BUCKETS;
}

/* Counts a connection from ip; NULL (nothing counted) when the address is at its cap. */
static ip_count_t *ip_acquire(const char *ip)
{
    uint32_t h = ip_hash(ip);
    ip_count_t *e = ip_table[h];
    while (e && strcmp(e->ip, ip) != 0)
        e = e->next;
    if (!e) {
        e = xcalloc(1, sizeof(*e));
        snprintf(e->ip, sizeof(e->ip), "%s", ip);
        e->next = ip_table[h];
        ip_table[h] = e;
        ip_entries++;
    }
    if (max_conns_per_ip && e->n >= max_conns_per_ip) return NULL;
    e->n++;
    return e;
}

static void ip_release(ip_count_t *e)
{
    if (--e->n > 0) return;
    ip_count_t **pp = &ip_table[ip_hash(e->ip)];
    while (*pp != e)
        pp = &(*pp)->next;
    *pp = e->next;
    free(e);
    ip_entries--;
}

static void on_conn_closed(uv_handle_t *h)
{
    http_conn_t *c = container_of((uv_tcp_t *)h, http_conn_t, tcp);
    if (c->ipc) ip_release(c->ipc);
    buf_free(&c->in);
    free(c);
    nconns--;
    if (shutting_down && nconns == 0 && shutdown_done) {
        void (*done)(void) = shutdown_done;
        shutdown_done = NULL;
        done();
    }
}

static void on_timer_closed(uv_handle_t *h)
{
    http_conn_t *c = container_of((uv_timer_t *)h, http_conn_t, timer);
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_linger_shutdown(uv_shutdown_t *sr, int status)
{
    (void)sr;
    (void)status; /* the connection closes on EOF, the byte cap or the timer either way */
}

/* Lingering close: the answer is written; send FIN, then read and discard what the client is
 * still sending (a refused body) until it closes, LINGER_MAX_BYTES or LINGER_TIMEOUT_MS. Closing
 * with unread bytes would make the kernel send a reset that can destroy the answer in flight. */
static void conn_linger(http_conn_t *c)
{
    c->state = CONN_LINGER;
    c->linger_bytes = 0;
    /* c->in may be under the parser right now (a reply from inside on_body): conn_process frees
     * it once the parser has returned. */
    if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, on_linger_shutdown) != 0) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, on_timer, LINGER_TIMEOUT_MS, 0);
    conn_read_start(c);
}

static void conn_close(http_conn_t *c)
{
    if (c->state == CONN_CLOSING) return;
    c->state = CONN_CLOSING;
    conn_read_stop(c);
    if (c->prev)
        c->prev->next = c->next;
    else
        conns = c->next;
    if (c->next) c->next->prev = c->prev;
    http_req_t *req = c->req;
    c->req = NULL;
    if (req) {
        req->conn = NULL;
        req->on_drain = NULL;
        if (req->replied)
            log_request(req);
        else
            log_info("%s %s client gone id=%s client=%s", req->method_name ? req->method_name : "-",
                     log_path(req), req->id, req->client_ip);
        /* on_gone is for requests still pending or streaming; conn_close never runs inside a
         * call of the request's owner except http_stream_close, which clears on_gone first. */
        http_req_cb gone = req->on_gone;
        req->on_gone = NULL;
        if (gone && (!req->replied || req->streaming)) gone(req);
        http_req_unref(req);
    }
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
}

static void on_refused_closed(uv_handle_t *h)
{
    free(h);
}

/* Over a cap: the connection was accepted (so it leaves the backlog and costs nothing more),
 * gets a 503 if its socket buffer takes it at once (never waiting), and is closed. Logged at
 * most once a second, with the running count. */
static void refuse_connection(uv_tcp_t *t, const char *why, const char *ip)
{
    static char busy[] =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Retry-After: 1\r\nConnection: close\r\nContent-Length: 65\r\n\r\n"
        "{\"error\":{\"code\":\"UNAVAILABLE\",\"message\":\"Too many connections\"}}";
    uv_buf_t b = uv_buf_init(busy, sizeof(busy) - 1);
    (void)uv_try_write((uv_stream_t *)t, &b, 1);
    uv_close((uv_handle_t *)t, on_refused_closed);
    note_refused(why, ip);
}

/* Counts a refusal over a cap (a connection, or a forwarded request over the per-IP cap). */
static void note_refused(const char *why, const char *ip)
{
    refused_total++;
    uint64_t now = uv_now(loop_ref);
    if (now - refused_logged_at >= 1000 || refused_logged_at == 0) {
        refused_logged_at = now;
        log_warn("refused a connection of %s (%s); %llu refused so far", ip, why,
                 (unsigned long long)refused_total);
    }
}

static void on_connection(uv_stream_t *srv, int status)
{
    if (status < 0) {
        log_warn("accept: %s", uv_strerror(status));
        return;
    }
    http_conn_t *c = xcalloc(1, sizeof(*c));
    uv_tcp_init(loop_ref, &c->tcp);
    if (uv_accept(srv, (uv_stream_t *)&c->tcp) != 0) {
        uv_close((uv_handle_t *)&c->tcp, (uv_close_cb)free);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET)
            uv_ip4_name((struct sockaddr_in *)&ss, c->ip, sizeof(c->ip));
        else if (ss.ss_family == AF_INET6)
            uv_ip6_name((struct sockaddr_in6 *)&ss, c->ip, sizeof(c->ip));
    }
    /* The caps: MAX_CONNECTIONS per worker, MAX_CONNECTIONS_PER_IP per client address. The
     * handle is the first member of c, so closing it frees c. */
    if (nconns >= max_conns) {
        refuse_connection(&c->tcp, "MAX_CONNECTIONS", c->ip);
        return;
    }
    /* A trusted proxy's connections carry many clients: each request is counted under its
     * forwarded client instead (conn_forwarded). */
    c->peer_trusted = netaddr_trusted_peer(c->ip);
    if (!c->peer_trusted && !(c->ipc = ip_acquire(c->ip))) {
        refuse_connection(&c->tcp, "MAX_CONNECTIONS_PER_IP", c->ip);
        return;
    }
    nconns++;
    c->side = srv == (uv_stream_t *)&side_server;
    uv_tcp_nodelay(&c->tcp, 1);
    uv_timer_init(loop_ref, &c->timer);
    c->timer.data = c;
    llhttp_init(&c->parser, HTTP_REQUEST, &settings);
    c->parser.data = c;
    c->state = CONN_IDLE;
    c->next = conns;
    if (conns) conns->prev = c;
    conns = c;
    conn_arm(c, IDLE_TIMEOUT_MS);
    conn_read_start(c);
}

static int listen_socket(const char *host, int port, bool reuseport, int *fd_out)
{
    struct sockaddr_storage addr;
    int rc;
    if (strchr(host, ':'))
        rc = uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr);
    else
        rc = uv_ip4_addr(host, port, (struct sockaddr_in *)&addr);
    if (rc) return rc;
    /* libuv 1.44 cannot set SO_REUSEPORT itself: make the socket, then hand it to libuv. */
    int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    socklen_t alen =
        addr.ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    if (bind(fd, (struct sockaddr *)&addr, alen) != 0 || listen(fd, 4096) != 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    *fd_out = fd;
    return 0;
}

int http_listen_socket(const char *host, int port, int *fd_out)
{
    return listen_socket(host, port, true, fd_out);
}

int http_listen_socket_exclusive(const char *host, int port, int *fd_out)
{
    return listen_socket(host, port, false, fd_out);
}

int http_server_listen_only(uv_loop_t *loop, int fd, const char *pattern)
{
    int rc;
    side_pattern = pattern;
    uv_tcp_init(loop, &side_server);
    if ((rc = uv_tcp_open(&side_server, fd)) != 0) return rc;
    if ((rc = uv_listen((uv_stream_t *)&side_server, 4096, on_connection)) != 0) return rc;
    side_open = true;
    return 0;
}

bool http_req_side_listener(const http_req_t *req)
{
    return req->conn && req->conn->side;
}

static uv_prepare_t log_turn;

static void on_log_turn(uv_prepare_t *h)
{
    (void)h;
    log_flush();
}

int http_server_start_fd(uv_loop_t *loop, int fd)
{
    loop_ref = loop;
    /* Parsed (and refused when invalid) by config_load, before any worker started. */
    max_conns = (size_t)cfg.max_connections;
    max_conns_per_ip = (size_t)cfg.max_connections_per_ip;
    request_timeout_ms = (uint64_t)cfg.request_timeout_seconds * 1000;
    body_timeout_ms = request_timeout_ms < BODY_TIMEOUT_MS ? request_timeout_ms : BODY_TIMEOUT_MS;
    stream_write_timeout_ms = (uint64_t)cfg.stream_write_timeout_seconds * 1000;
    memset(&settings, 0, sizeof(settings));
    settings.on_message_begin = on_message_begin;
    settings.on_url = on_url;
    settings.on_url_complete = on_url_complete;
    settings.on_header_field = on_header_field;
    settings.on_header_field_complete = on_header_field_complete;
    settings.on_header_value = on_header_value;
    settings.on_header_value_complete = on_header_value_complete;
    settings.on_headers_complete = on_headers_complete;
    settings.on_body = on_body;
    settings.on_message_complete = on_message_complete;

    int rc;
    uv_tcp_init(loop, &server);
    if ((rc = uv_tcp_open(&server, fd)) != 0) return rc;
    if ((rc = uv_listen((uv_stream_t *)&server, 4096, on_connection)) != 0) return rc;
    server_open = true;
    /* The access records of a loop turn leave in one write when the turn ends (core/log.h):
     * one write per request was a third of the syscalls of a small answer. */
    uv_prepare_init(loop, &log_turn);
    uv_prepare_start(&log_turn, on_log_turn);
    uv_unref((uv_handle_t *)&log_turn);
    log_set_batching(true);
    return 0;
}

int http_server_start(uv_loop_t *loop, const char *host, int port)
{
    int fd, rc = http_listen_socket(host, port, &fd);
    if (rc != 0) return rc;
    return http_server_start_fd(loop, fd);
}

void http_server_shutdown(void (*done)(void))
{
    shutting_down = true;
    shutdown_done = done;
    if (server_open) {
        uv_close((uv_handle_t *)&server, NULL);
        server_open = false;
        /* The requests still running log as they end, each line at once. */
        log_set_batching(false);
        uv_close((uv_handle_t *)&log_turn, NULL);
    }
    if (side_open) {
        uv_close((uv_handle_t *)&side_server, NULL);
        side_open = false;
    }
    /* Idle connections and event streams close now; busy ones close after their response. A
     * stream of declared length (a file download) is a request in flight: it finishes within
     * the grace like an upload, or is cut with the rest when the grace is over. */
    http_conn_t *c = conns;
    while (c) {
        http_conn_t *next = c->next;
        if (c->state == CONN_IDLE || c->state == CONN_LINGER ||
            (c->state == CONN_STREAMING && !c->stream_sized))
            conn_close(c);
        c = next;
    }
    if (nconns == 0 && shutdown_done) {
        shutdown_done = NULL;
        done();
    }
}

size_t http_server_abort_all(void)
{
    size_t cut = 0;
    /* conn_close unlinks the connection (and an on_gone may close others): take the head each
     * time. A connection with a request was cut, whether its answer was pending or unsent. */
    while (conns) {
        http_conn_t *c = conns;
        if (c->req) {
            cut++;
            log_warn("shutdown: cutting %s %s id=%s",
                     c->req->method_name ? c->req->method_name : "-", log_path(c->req), c->req->id);
        }
        conn_close(c);
    }
    return cut;
}

/*
 * Expo push batches over libcurl multi, or, in development without PUSH_URL, as .json files
 * written with uv_fs_* calls. See rt/push.h for the contract; REFERENCE.md section 6 has the wire
 * format.
 */
#include "rt/push.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "core/mem.h"
#include "rt/curlm.h"

#define PUSH_CONNECT_TIMEOUT_S 10L
#define PUSH_TOTAL_TIMEOUT_S 30L
#define PUSH_MAX_RESPONSE (1024 * 1024)

typedef struct push_job {
    push_done_cb cb;
    void *data;
    const char *const *tokens;
    int n;
    CURL *easy;
    struct curl_slist *headers;
    char *body;
    buf_t resp;
    char errbuf[CURL_ERROR_SIZE];
    bool invalid;
    /* development file sink */
    const char *fail;     /* set: completes through curlm_fail with this error (retryable) */
    const char *fs_error; /* a step of the file write failed */
    uv_fs_t fs;
    uv_work_t work; /* PUSH_DIR made again, off the loop */
    bool remade;
    uv_file file;
    size_t off, len;
    char *tmp_path, *path;
} push_job_t;

static struct {
    uv_loop_t *loop;
} S;

static size_t on_write(char *p, size_t size, size_t nmemb, void *userp);
static void on_done(CURL *easy, CURLcode code, long status, void *data);
static void job_free(push_job_t *j);
static void finish_simple(push_job_t *j, long status, bool retryable, const char *error);
static void fail_later(push_job_t *j, const char *error);
static void file_write(push_job_t *j);
static void file_on_open(uv_fs_t *req);
static void file_open(uv_loop_t *loop, push_job_t *j);
static void file_on_write(uv_fs_t *req);
static void file_on_close(uv_fs_t *req);
static void file_on_unlink(uv_fs_t *req);
static void file_on_rename(uv_fs_t *req);

/* Development without PUSH_URL: batches go to files under push_dir. */
static bool to_files(void)
{
    return !cfg.production && !(cfg.push_url && *cfg.push_url);
}

static const char *push_dir(void)
{
    return cfg.push_dir && *cfg.push_dir ? cfg.push_dir : PUSH_DEFAULT_DIR;
}

static int mkdir_p(const char *dir)
{
    char *p = xstrdup(dir), *s;
    int rc = 0;

    for (s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                rc = -1;
                break;
            }
            *s = c;
            if (c == '\0') break;
        }
    }
    free(p);
    return rc;
}

int push_init(uv_loop_t *loop)
{
    S.loop = loop;
    if (!to_files()) return 0;
    struct stat st;
    if (mkdir_p(push_dir()) != 0) {
        log_error("push: cannot create %s (PUSH_DIR): %s", push_dir(), strerror(errno));
        return -1;
    }
    /* mkdir_p takes EEXIST as success: a file of that name is not a folder to write into */
    if (stat(push_dir(), &st) != 0 || !S_ISDIR(st.st_mode)) {
        log_error("push: %s (PUSH_DIR) is not a folder", push_dir());
        return -1;
    }
    log_info("push: no PUSH_URL, writing messages to %s", push_dir());
    return 0;
}

void push_shutdown(void)
{
    S.loop = NULL;
}

void push_send(const char *const *tokens, int n, const push_msg_t *msg, push_done_cb cb, void *data)
{
    push_job_t *j = xcalloc(1, sizeof(*j));
    json_t *arr = json_array();
    const char *url = cfg.push_url && *cfg.push_url ? cfg.push_url : PUSH_DEFAULT_URL;
    int i;

    j->cb = cb;
    j->data = data;
    j->tokens = tokens;
    j->n = n;
    for (i = 0; i < n && n <= PUSH_BATCH_MAX; i++) {
        json_t *m = json_object();

        json_object_set_new(m, "to", json_string(tokens[i] ? tokens[i] : ""));
        if (msg->title) json_object_set_new(m, "title", json_string(msg->title));
        if (msg->body) json_object_set_new(m, "body", json_string(msg->body));
        if (msg->data && json_is_object(msg->data)) json_object_set(m, "data", msg->data);
        json_object_set_new(m, "sound", json_string("default"));
        json_array_append_new(arr, m);
    }
    j->body = json_dumps(arr, JSON_COMPACT);
    json_decref(arr);
    if (n < 1 || n > PUSH_BATCH_MAX || !j->body) {
        /* a caller bug: reported from the loop, nothing is sent */
        log_error("push: invalid batch of %d tokens", n);
        j->invalid = true;
        j->easy = curl_easy_init();
        if (!j->easy) {
            log_error("push: out of memory");
            abort();
        }
        curlm_fail(j->easy, CURLE_BAD_FUNCTION_ARGUMENT, on_done, j);
        return;
    }
    if (to_files()) {
        file_write(j);
        return;
    }
    j->easy = curl_easy_init();
    if (j->easy) {
        curl_easy_setopt(j->easy, CURLOPT_URL, url);
        curl_easy_setopt(j->easy, CURLOPT_POSTFIELDS, j->body);
        j->headers = curl_slist_append(j->headers, "Accept: application/json");
        j->headers = curl_slist_append(j->headers, "Content-Type: application/json");
        if (cfg.push_access_token && *cfg.push_access_token) {
            buf_t h = BUF_INIT;

            buf_printf(&h, "Authorization: Bearer %s", cfg.push_access_token);
            j->headers = curl_slist_append(j->headers, h.data);
            buf_free(&h);
        }
        curl_easy_setopt(j->easy, CURLOPT_HTTPHEADER, j->headers);
        curl_easy_setopt(j->easy, CURLOPT_ACCEPT_ENCODING, ""); /* gzip/deflate answers */
        curl_easy_setopt(j->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(j->easy, CURLOPT_WRITEDATA, j);
        curl_easy_setopt(j->easy, CURLOPT_CONNECTTIMEOUT, PUSH_CONNECT_TIMEOUT_S);
        curl_easy_setopt(j->easy, CURLOPT_TIMEOUT, PUSH_TOTAL_TIMEOUT_S);
        curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->errbuf);
        curl_easy_setopt(j->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    }
    if (!j->easy) {
        log_error("push: out of memory");
        abort();
    }
    curlm_add(j->easy, on_done, j);
}

static size_t on_write(char *p, size_t size, size_t nmemb, void *userp)
{
    push_job_t *j = userp;
    size_t n = size * nmemb;

    if (j->resp.len + n > PUSH_MAX_RESPONSE) return 0; /* aborts the transfer */
    buf_append(&j->resp, p, n);
    return n;
}

static void job_free(push_job_t *j)
{
    if (j->easy) curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->headers);
    free(j->body);
    free(j->tmp_path);
    free(j->path);
    buf_free(&j->resp);
    free(j);
}

static void finish_simple(push_job_t *j, long status, bool retryable, const char *error)
{
    push_result_t r;

    memset(&r, 0, sizeof(r));
    r.http_status = status;
    r.retryable = retryable;
    r.error = error;
    j->cb(&r, j->data);
    job_free(j);
}

int push_parse_tickets(const char *body, size_t len, const char *const *tokens, int n,
                       push_result_t *r)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr), *tickets;
    size_t i;
    int rc = -1;

    r->unregistered = NULL;
    r->n_unregistered = 0;
    r->n_ticket_errors = 0;
    if (!root) goto done;
    tickets = json_object_get(root, "data");
    if (!json_is_array(tickets)) goto done;
    r->unregistered = xcalloc((size_t)(n > 0 ? n : 1), sizeof(char *));
    for (i = 0; i < json_array_size(tickets); i++) {
        json_t *t = json_array_get(tickets, i);
        const char *status = json_string_value(json_object_get(t, "status"));
        const char *err;

        if (status && strcmp(status, "ok") == 0) continue;
        r->n_ticket_errors++;
        err = json_string_value(json_object_get(json_object_get(t, "details"), "error"));
        if (err && strcmp(err, "DeviceNotRegistered") == 0 && (int)i < n && tokens[i])
            r->unregistered[r->n_unregistered++] = tokens[i];
        else
            log_warn("push: ticket error %s: %s", err ? err : "?",
                     json_string_value(json_object_get(t, "message"))
                         ? json_string_value(json_object_get(t, "message"))
                         : "");
    }
    rc = 0;
done:
    json_decref(root);
    return rc;
}

static void on_done(CURL *easy, CURLcode code, long status, void *data)
{
    push_job_t *j = data;
    push_result_t r;
    char err[CURL_ERROR_SIZE + 64];

    (void)easy;
    memset(&r, 0, sizeof(r));
    r.http_status = status;
    if (j->invalid) {
        finish_simple(j, 0, false, "push: invalid batch");
        return;
    }
    if (j->fail) {
        finish_simple(j, 0, true, j->fail);
        return;
    }
    if (code != CURLE_OK) {
        snprintf(err, sizeof(err), "push: %s%s%s", curl_easy_strerror(code),
                 j->errbuf[0] ? ": " : "", j->errbuf);
        finish_simple(j, status, true, err);
        return;
    }
    if (status == 429 || status >= 500) {
        snprintf(err, sizeof(err), "push: HTTP %ld", status);
        finish_simple(j, status, true, err);
        return;
    }
    if (status < 200 || status > 299) {
        snprintf(err, sizeof(err), "push: HTTP %ld: %.200s", status,
                 j->resp.data ? j->resp.data : "");
        finish_simple(j, status, false, err);
        return;
    }
    if (push_parse_tickets(j->resp.data ? j->resp.data : "", j->resp.len, j->tokens, j->n, &r) !=
        0) {
        free(r.unregistered);
        finish_simple(j, status, true, "push: response without tickets");
        return;
    }
    r.ok = true;
    r.http_status = status;
    j->cb(&r, j->data);
    free(r.unregistered);
    job_free(j);
}

/* ---------------------------------------------------------------------------------------- */
/* Development file sink: one file per batch, the exact body a POST would carry, written to a
 * hidden temporary name and then renamed, so a reader never sees half a batch. */

/* Completes from the loop, never inside push_send: curlm defers the callback. */
static void fail_later(push_job_t *j, const char *error)
{
    j->fail = error;
    if (!j->easy) j->easy = curl_easy_init();
    if (!j->easy) {
        log_error("push: out of memory");
        abort();
    }
    curlm_fail(j->easy, CURLE_WRITE_ERROR, on_done, j);
}

static void file_write(push_job_t *j)
{
    char name[64];
    unsigned char r[8];
    const char *dir = push_dir();
    size_t n;
    uv_timeval64_t tv;

    if (!S.loop) {
        fail_later(j, "push: not running");
        return;
    }
    uv_gettimeofday(&tv);
    if (uv_random(NULL, NULL, r, sizeof(r), 0, NULL) != 0) memset(r, 0, sizeof(r));
    snprintf(name, sizeof(name), "%lld%03d-%02x%02x%02x%02x%02x%02x%02x%02x.json",
             (long long)tv.tv_sec, (int)(tv.tv_usec / 1000), r[0], r[1], r[2], r[3], r[4], r[5],
             r[6], r[7]);
    n = strlen(dir) + strlen(name) + 8;
    j->path = xmalloc(n);
    snprintf(j->path, n, "%s/%s", dir, name);
    j->tmp_path = xmalloc(n);
    snprintf(j->tmp_path, n, "%s/.%s.tmp", dir, name);
    j->len = strlen(j->body);
    file_open(S.loop, j);
}

static void file_open(uv_loop_t *loop, push_job_t *j)
{
    j->fs.data = j;
    if (uv_fs_open(loop, &j->fs, j->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644,
                   file_on_open) != 0)
        fail_later(j, "push: cannot open push file");
}

/* PUSH_DIR was removed while the server runs (a developer clearing the messages): it is made
 * again once per batch, in the thread pool, and the open retried. */
static void remake_work(uv_work_t *w)
{
    push_job_t *j = w->data;

    if (mkdir_p(push_dir()) != 0) j->fs_error = "push: cannot create PUSH_DIR";
}

static void remake_done(uv_work_t *w, int status)
{
    push_job_t *j = w->data;

    if (status != 0 || j->fs_error) {
        log_error("push: cannot create %s (PUSH_DIR) again", push_dir());
        finish_simple(j, 0, true, "push: cannot open push file");
        return;
    }
    log_info("push: %s (PUSH_DIR) was missing: made again", push_dir());
    file_open(w->loop, j);
}

static void file_on_open(uv_fs_t *req)
{
    push_job_t *j = req->data;
    uv_buf_t b;

    if (req->result == UV_ENOENT && !j->remade) {
        uv_loop_t *loop = req->loop;

        uv_fs_req_cleanup(req);
        j->remade = true;
        j->work.data = j;
        if (uv_queue_work(loop, &j->work, remake_work, remake_done) != 0)
            finish_simple(j, 0, true, "push: cannot open push file");
        return;
    }
    if (req->result < 0) {
        log_error("push: open %s: %s", j->tmp_path, uv_strerror((int)req->result));
        uv_fs_req_cleanup(req);
        finish_simple(j, 0, true, "push: cannot open push file");
        return;
    }
    j->file = (uv_file)req->result;
    uv_fs_req_cleanup(req);
    b = uv_buf_init(j->body, (unsigned)j->len);
    uv_fs_write(req->loop, &j->fs, j->file, &b, 1, 0, file_on_write);
}

static void file_on_write(uv_fs_t *req)
{
    push_job_t *j = req->data;
    uv_loop_t *loop = req->loop;

    if (req->result <= 0) { /* 0: no progress, which would loop forever */
        log_error("push: write %s: %s", j->tmp_path,
                  req->result < 0 ? uv_strerror((int)req->result) : "nothing written");
        j->fs_error = "push: cannot write push file";
    } else {
        j->off += (size_t)req->result;
    }
    uv_fs_req_cleanup(req);
    if (!j->fs_error && j->off < j->len) { /* short write: go on */
        uv_buf_t b = uv_buf_init(j->body + j->off, (unsigned)(j->len - j->off));
        uv_fs_write(loop, &j->fs, j->file, &b, 1, (int64_t)j->off, file_on_write);
        return;
    }
    uv_fs_close(loop, &j->fs, j->file, file_on_close);
}

static void file_on_close(uv_fs_t *req)
{
    push_job_t *j = req->data;
    uv_loop_t *loop = req->loop;

    if (req->result < 0 && !j->fs_error) { /* a write the file system reports only now */
        log_error("push: close %s: %s", j->tmp_path, uv_strerror((int)req->result));
        j->fs_error = "push: cannot write push file";
    }
    uv_fs_req_cleanup(req);
    if (j->fs_error) {
        uv_fs_unlink(loop, &j->fs, j->tmp_path, file_on_unlink);
        return;
    }
    uv_fs_rename(loop, &j->fs, j->tmp_path, j->path, file_on_rename);
}

static void file_on_unlink(uv_fs_t *req)
{
    push_job_t *j = req->data;

    uv_fs_req_cleanup(req);
    finish_simple(j, 0, true, j->fs_error);
}

static void file_on_rename(uv_fs_t *req)
{
    push_job_t *j = req->data;
    uv_loop_t *loop = req->loop;
    int rc = (int)req->result;
    push_result_t r;

    uv_fs_req_cleanup(req);
    if (rc < 0) { /* the temporary file is removed, as after a failed write */
        log_error("push: rename %s: %s", j->path, uv_strerror(rc));
        j->fs_error = "push: cannot write push file";
        uv_fs_unlink(loop, &j->fs, j->tmp_path, file_on_unlink);
        return;
    }
    log_debug("push: wrote %s", j->path);
    /* as a delivery the endpoint accepted: no tickets, so no token is unregistered */
    memset(&r, 0, sizeof(r));
    r.ok = true;
    j->cb(&r, j->data);
    job_free(j);
}

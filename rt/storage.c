/*
 * Object storage drivers (see storage.h).
 *
 * Local file work (stat, hash, unlink, the writer's writes and renames) runs as uv_queue_work
 * jobs, so blocking syscalls stay on libuv's pool threads. S3 calls are libcurl easy handles on
 * rt/curlm; the PUT of a finished upload reads its temporary file through pool jobs too and
 * pauses curl (CURL_READFUNC_PAUSE) while a read is in flight.
 */
#include "rt/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <mbedtls/sha256.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/random.h"
#include "core/url.h"
#include "db/db.h"
#include "db/q_storage.h"
#include "domain/crypto.h"
#include "domain/sigv4.h"
#include "domain/text.h"
#include "rt/curlm.h"

#define KEY_MAX 400
#define FILENAME_KEY_MAX 100
#define SECRET_MIN 32

static struct {
    uv_loop_t *loop;
    bool local;
    bool started;
    char secret[128];
    size_t secret_len;
    uv_timer_t secret_timer; /* retries loading the database secret until it is there */
    bool secret_loading;     /* its statement is in flight: a slow database gets one at a time */
    bool sweep_running;
    uv_work_t sweep;
    int swept;
    char host[64]; /* gethostname, reduced to [A-Za-z0-9.-]: the temporary files' prefix */
    const char *region;
    char *endpoint;
} S;

static void load_secret(uv_timer_t *t);
static void on_secret(db_result_t *r, void *data);

/* ---- setup ---- */

static void on_secret(db_result_t *r, void *data)
{
    (void)data;
    S.secret_loading = false;
    const char *v = r->ok ? db_get(r, 0, STORAGE_SECRET_VALUE) : NULL;
    if (!v || strlen(v) < SECRET_MIN || strlen(v) >= sizeof(S.secret)) {
        if (r->ok) log_error("storage: server_secrets has no storage_url_key");
        return; /* the timer tries again */
    }
    memcpy(S.secret, v, strlen(v) + 1);
    S.secret_len = strlen(v);
    if (S.started) uv_timer_stop(&S.secret_timer);
}

static void load_secret(uv_timer_t *t)
{
    (void)t;
    if (S.secret_len || S.secret_loading) return;
    S.secret_loading = true;
    db_query(SQL_STORAGE_SECRET, 0, NULL, on_secret, NULL);
}

int storage_init(uv_loop_t *loop)
{
    S.loop = loop;
    S.local = strcmp(cfg.storage_driver, "s3") != 0;
    S.region = cfg.s3_region && *cfg.s3_region ? cfg.s3_region : "us-east-1";
    free(S.endpoint);
    if (cfg.s3_endpoint && *cfg.s3_endpoint)
        S.endpoint = xstrdup(cfg.s3_endpoint);
    else {
        size_t n = strlen(S.region) + 32;
        S.endpoint = xmalloc(n);
        snprintf(S.endpoint, n, "https://s3.%s.amazonaws.com", S.region);
    }
    const char *env = getenv("STORAGE_SECRET");
    S.secret_len = 0;
    S.secret_loading = false;
    if (env && strlen(env) >= SECRET_MIN && strlen(env) < sizeof(S.secret)) {
        memcpy(S.secret, env, strlen(env) + 1);
        S.secret_len = strlen(env);
    } else if (env && *env) {
        log_warn("storage: STORAGE_SECRET needs %d to %zu characters; using the database secret",
                 SECRET_MIN, sizeof(S.secret) - 1);
    }
    char host[64] = "";
    if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    size_t hn = 0;
    for (size_t i = 0; host[i] && hn + 1 < sizeof S.host; i++) {
        char c = host[i];
        bool ok =
            (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.';
        S.host[hn++] = ok ? c : '_';
    }
    if (hn == 0) S.host[hn++] = '_';
    S.host[hn] = '\0';
    int rc = uv_timer_init(loop, &S.secret_timer);
    if (rc != 0) return rc;
    S.started = true;
    storage_sweep_tmp(); /* what a crashed worker left behind */
    if (!S.secret_len) uv_timer_start(&S.secret_timer, load_secret, 0, 1000);
    return 0;
}

void storage_shutdown(void)
{
    if (!S.started) return;
    S.started = false;
    uv_timer_stop(&S.secret_timer);
    uv_close((uv_handle_t *)&S.secret_timer, NULL);
}

static bool s3_configured(void)
{
    return cfg.s3_bucket && *cfg.s3_bucket && cfg.s3_access_key_id && *cfg.s3_access_key_id &&
           cfg.s3_secret_access_key && *cfg.s3_secret_access_key;
}

bool storage_ready(void)
{
    return S.local ? S.secret_len > 0 : s3_configured();
}

const char *storage_unconfigured_message(void)
{
    if (S.local)
        return "Storage is not configured: set STORAGE_SECRET (32 to 127 characters), or run "
               "coachd migrate so that the database holds the storage secret";
    const char *names[3];
    int n = 0;
    if (!cfg.s3_bucket || !*cfg.s3_bucket) names[n++] = "S3_BUCKET";
    if (!cfg.s3_access_key_id || !*cfg.s3_access_key_id) names[n++] = "S3_ACCESS_KEY_ID";
    if (!cfg.s3_secret_access_key || !*cfg.s3_secret_access_key)
        names[n++] = "S3_SECRET_ACCESS_KEY";
    if (n == 0) return "Storage could not sign the URL: check S3_ENDPOINT and S3_REGION";
    static char msg[160]; /* one worker, one thread: used before the next request runs */
    int len = snprintf(msg, sizeof msg, "Storage is not configured: set %s", names[0]);
    for (int i = 1; i < n; i++)
        len += snprintf(msg + len, sizeof msg - (size_t)len, "%s%s", i == n - 1 ? " and " : ", ",
                        names[i]);
    snprintf(msg + len, sizeof msg - (size_t)len, " (STORAGE_DRIVER=s3)");
    return msg;
}

bool storage_loaded(void)
{
    return !S.local || S.secret_len > 0;
}

bool storage_is_local(void)
{
    return S.local;
}

/* ---- temporary files ---- */

/* Whether a temporary file may go: a worker of this host that is not running made it, or it
 * has not been written for STORAGE_TMP_MAX_AGE. Pool thread. */
static bool tmp_orphaned(const char *name, time_t mtime, time_t now)
{
    size_t hl = strlen(S.host);
    if (strncmp(name, S.host, hl) == 0 && name[hl] == '-') {
        char *end;
        long pid = strtol(name + hl + 1, &end, 10);
        if (end != name + hl + 1 && *end == '-' && pid > 0 && pid != (long)getpid() &&
            kill((pid_t)pid, 0) != 0 && errno == ESRCH)
            return true;
    }
    return now - mtime > STORAGE_TMP_MAX_AGE;
}

static void on_sweep_work(uv_work_t *w)
{
    (void)w;
    S.swept = 0;
    char dir[4096];
    if (snprintf(dir, sizeof dir, "%s/.tmp", cfg.storage_dir) >= (int)sizeof dir) return;
    DIR *d = opendir(dir);
    if (!d) return;
    time_t now = time(NULL);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (n < 6 || strcmp(e->d_name + n - 5, ".part") != 0) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (tmp_orphaned(e->d_name, st.st_mtime, now) && unlinkat(dirfd(d), e->d_name, 0) == 0)
            S.swept++;
    }
    closedir(d);
}

static void on_sweep_done(uv_work_t *w, int status)
{
    (void)w;
    (void)status;
    S.sweep_running = false;
    if (S.swept > 0) log_info("storage: removed %d orphaned temporary upload file(s)", S.swept);
}

void storage_sweep_tmp(void)
{
    if (!S.started || S.sweep_running) return;
    S.sweep_running = true;
    if (uv_queue_work(S.loop, &S.sweep, on_sweep_work, on_sweep_done) != 0) S.sweep_running = false;
}

/* ---- keys, names, headers ---- */

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

char *storage_key_make(arena_t *a, const char *prefix, const char *uuid, const char *filename)
{
    char name[FILENAME_KEY_MAX + 1];
    size_t n = 0;
    for (const char *p = filename; *p && n < FILENAME_KEY_MAX; p++) {
        if (((unsigned char)*p & 0xC0) == 0x80) continue; /* one '_' per UTF-8 code point */
        name[n++] = key_char(*p) ? *p : '_';
    }
    name[n] = '\0';
    /* No hidden files and no "." or ".." segments. */
    for (size_t i = 0; i < n && name[i] == '.'; i++)
        name[i] = '_';
    return arena_printf(a, "%s/%s/%s", prefix, uuid, n ? name : "file");
}

bool storage_key_valid(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n > KEY_MAX || key[0] == '/' || key[n - 1] == '/') return false;
    bool seg_start = true;
    for (size_t i = 0; i < n; i++) {
        char c = key[i];
        if (c == '/') {
            if (seg_start) return false; /* "//" */
            seg_start = true;
            continue;
        }
        if (!key_char(c) || (seg_start && c == '.')) return false;
        seg_start = false;
    }
    return true;
}

char *storage_content_disposition(arena_t *a, const char *filename)
{
    size_t n = strlen(filename);
    char *ascii = arena_alloc(a, n + 1);
    text_ascii_fallback(filename, n, ascii);
    return arena_printf(a, "attachment; filename=\"%s\"; filename*=UTF-8''%s", ascii,
                        url_encode(a, filename));
}

char *storage_local_path(arena_t *a, const char *key)
{
    return arena_printf(a, "%s/%s", cfg.storage_dir, key);
}

/* ---- references ---- */

#define REF_TAG_LEN 32

static void ref_tag(const char *mime, size_t mlen, const char *key, size_t klen,
                    char out[REF_TAG_LEN + 1])
{
    uint8_t mac[CRYPTO_SHA256_LEN];
    char hex[CRYPTO_SHA256_HEX_LEN + 1];
    size_t n = mlen + klen + 16;
    char *msg = xmalloc(n);
    int len = snprintf(msg, n, "ref\n%.*s\n%.*s", (int)mlen, mime, (int)klen, key);
    crypto_hmac_sha256(S.secret, S.secret_len, msg, (size_t)len, mac);
    free(msg);
    crypto_hex_encode(mac, sizeof mac, hex);
    memcpy(out, hex, REF_TAG_LEN);
    out[REF_TAG_LEN] = '\0';
}

char *storage_ref_make(arena_t *a, const char *mime, const char *key)
{
    if (!S.secret_len) return NULL;
    char tag[REF_TAG_LEN + 1];
    ref_tag(mime, strlen(mime), key, strlen(key), tag);
    return arena_printf(a, "storage:%s:%s:%s", mime, key, tag);
}

char *storage_ref_render(arena_t *a, const char *s, size_t n, int ttl_seconds)
{
    if (!S.secret_len || n < 8 + REF_TAG_LEN + 4 || memcmp(s, "storage:", 8) != 0) return NULL;
    const char *mime = s + 8, *end = s + n;
    const char *c1 = memchr(mime, ':', (size_t)(end - mime));
    if (!c1 || end - c1 < REF_TAG_LEN + 3 || end[-REF_TAG_LEN - 1] != ':') return NULL;
    const char *key = c1 + 1, *tag = end - REF_TAG_LEN;
    size_t mlen = (size_t)(c1 - mime), klen = (size_t)(tag - 1 - key);
    char want[REF_TAG_LEN + 1];
    ref_tag(mime, mlen, key, klen, want);
    if (!crypto_ct_equal(want, tag, REF_TAG_LEN)) return NULL;
    char *k = arena_strndup(a, key, klen), *m = arena_strndup(a, mime, mlen);
    const char *slash = strrchr(k, '/');
    return storage_presign_get(a, k, slash ? slash + 1 : k, m, ttl_seconds);
}

/* ---- presigning ---- */

/* HMAC over length-prefixed fields, so no field can borrow bytes from its neighbour. */
static void local_sig(const char *method, const char *key, const char *mime, const char *extra,
                      long long exp, char out[CRYPTO_SHA256_HEX_LEN + 1])
{
    arena_t a;
    arena_init(&a);
    char *msg = arena_printf(&a, "coachd-storage-v1\n%s\n%zu:%s\n%zu:%s\n%zu:%s\n%lld", method,
                             strlen(key), key, strlen(mime), mime, strlen(extra), extra, exp);
    uint8_t mac[CRYPTO_SHA256_LEN];
    crypto_hmac_sha256(S.secret, S.secret_len, msg, strlen(msg), mac);
    crypto_hex_encode(mac, sizeof mac, out);
    arena_free(&a);
}

static int ttl_ok(int ttl)
{
    return ttl < 1 ? 1 : ttl > SIGV4_MAX_EXPIRES ? SIGV4_MAX_EXPIRES : ttl;
}

/* A PUT (disposition NULL) is bound to its Content-Type and size, and to If-None-Match: * so
 * that S3 refuses it once the key holds an object: a registered key's bytes never change, even
 * through a URL replayed before it expires. */
static char *s3_presign(arena_t *a, const char *method, const char *key, const char *mime,
                        bool sign_length, uint64_t size, const char *disposition, int ttl)
{
    if (!s3_configured()) return NULL;
    char date[SIGV4_AMZ_DATE_LEN + 1];
    sigv4_amz_date((int64_t)time(NULL) * 1000, date);
    sigv4_presign_t p = {.method = method,
                         .endpoint = S.endpoint,
                         .region = S.region,
                         .bucket = cfg.s3_bucket,
                         .key = key,
                         .access_key = cfg.s3_access_key_id,
                         .secret_key = cfg.s3_secret_access_key,
                         .amz_date = date,
                         .expires = (uint32_t)ttl_ok(ttl),
                         .path_style = cfg.s3_force_path_style,
                         .query_content_sha256 = true};
    if (disposition) {
        p.response_content_disposition = disposition;
        p.response_content_type = mime;
    } else {
        p.content_type = mime;
        p.sign_length = sign_length;
        p.content_length = size;
        p.if_none_match_any = true;
    }
    char *url = NULL;
    if (sigv4_presign_url(&p, &url) != 0) return NULL;
    char *out = arena_strdup(a, url);
    free(url);
    return out;
}

char *storage_presign_get(arena_t *a, const char *key, const char *filename, const char *mime_type,
                          int ttl_seconds)
{
    if (!key || !filename || !mime_type || !storage_key_valid(key)) return NULL;
    if (!S.local)
        return s3_presign(a, "GET", key, mime_type, false, 0,
                          storage_content_disposition(a, filename), ttl_seconds);
    if (!S.secret_len) return NULL;
    long long exp = (long long)time(NULL) + ttl_ok(ttl_seconds);
    char sig[CRYPTO_SHA256_HEX_LEN + 1];
    local_sig("GET", key, mime_type, filename, exp, sig);
    return arena_printf(a, "%s/api/files/local?k=%s&t=%s&f=%s&e=%lld&s=%s", cfg.public_url,
                        url_encode(a, key), url_encode(a, mime_type), url_encode(a, filename), exp,
                        sig);
}

char *storage_presign_put(arena_t *a, const char *key, const char *mime_type, uint64_t size,
                          int ttl_seconds)
{
    if (!key || !mime_type || !storage_key_valid(key)) return NULL;
    if (!S.local) return s3_presign(a, "PUT", key, mime_type, true, size, NULL, ttl_seconds);
    if (!S.secret_len) return NULL;
    long long exp = (long long)time(NULL) + ttl_ok(ttl_seconds);
    char sig[CRYPTO_SHA256_HEX_LEN + 1], sz[24];
    snprintf(sz, sizeof sz, "%llu", (unsigned long long)size);
    local_sig("PUT", key, mime_type, sz, exp, sig);
    return arena_printf(a, "%s/api/files/local?k=%s&t=%s&n=%s&e=%lld&s=%s", cfg.public_url,
                        url_encode(a, key), url_encode(a, mime_type), sz, exp, sig);
}

static bool parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || strlen(s) > 19) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

int storage_local_verify(http_req_t *req, int method, storage_grant_t *g)
{
    if (!S.local || !S.secret_len) return -1;
    const char *key = http_req_query(req, "k"), *mime = http_req_query(req, "t");
    const char *exp_s = http_req_query(req, "e"), *sig = http_req_query(req, "s");
    const char *extra = method == HTTP_M_PUT ? http_req_query(req, "n") : http_req_query(req, "f");
    uint64_t exp;
    if (!key || !mime || !extra || !sig || !parse_u64(exp_s, &exp) || !storage_key_valid(key))
        return -1;
    if ((long long)exp < (long long)time(NULL)) return -1;
    char want[CRYPTO_SHA256_HEX_LEN + 1];
    local_sig(method == HTTP_M_PUT ? "PUT" : "GET", key, mime, extra, (long long)exp, want);
    if (strlen(sig) != CRYPTO_SHA256_HEX_LEN || !crypto_ct_streq(sig, want)) return -1;
    memset(g, 0, sizeof(*g));
    g->key = key;
    g->mime_type = mime;
    if (method == HTTP_M_PUT) {
        if (!parse_u64(extra, &g->size)) return -1;
    } else {
        g->filename = extra;
    }
    return 0;
}

/* ---- local file jobs (thread pool) ---- */

enum { FS_STAT, FS_HASH, FS_DELETE, FS_CHECK };

typedef struct fsjob {
    uv_work_t work;
    int op;
    char *path;
    int rc;
    uint64_t size;
    char hex[CRYPTO_SHA256_HEX_LEN + 1];
    storage_stat_cb stat_cb;
    storage_hash_cb hash_cb;
    storage_done_cb done_cb;
    void *data;
} fsjob_t;

/* mkdir -p of the directory part of path (pool thread). */
static int mkdirs_for(const char *path)
{
    char tmp[4096];
    size_t n = strlen(path);
    if (n >= sizeof tmp) return -ENAMETOOLONG;
    memcpy(tmp, path, n + 1);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0750) != 0 && errno != EEXIST) return -errno;
        *p = '/';
    }
    return 0;
}

static int hash_fd(int fd, uint64_t *size, char hex[CRYPTO_SHA256_HEX_LEN + 1])
{
    mbedtls_sha256_context sha;
    uint8_t digest[CRYPTO_SHA256_LEN];
    char *buf = xmalloc(STORAGE_WRITER_CHUNK);
    int rc = 0;
    *size = 0;
    mbedtls_sha256_init(&sha);
    mbedtls_sha256_starts_ret(&sha, 0);
    for (;;) {
        ssize_t r = read(fd, buf, STORAGE_WRITER_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = -errno;
            break;
        }
        if (r == 0) break;
        mbedtls_sha256_update_ret(&sha, (const unsigned char *)buf, (size_t)r);
        *size += (uint64_t)r;
    }
    mbedtls_sha256_finish_ret(&sha, digest);
    mbedtls_sha256_free(&sha);
    crypto_hex_encode(digest, sizeof digest, hex);
    free(buf);
    return rc;
}

static void on_fs_work(uv_work_t *w)
{
    fsjob_t *j = container_of(w, fsjob_t, work);
    struct stat st;
    switch (j->op) {
    case FS_STAT:
        if (stat(j->path, &st) != 0)
            j->rc = errno == ENOENT ? STORAGE_ENOENT : STORAGE_EIO;
        else
            j->size = (uint64_t)st.st_size;
        break;
    case FS_HASH: {
        int fd = open(j->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            j->rc = errno == ENOENT ? STORAGE_ENOENT : STORAGE_EIO;
            break;
        }
        if (hash_fd(fd, &j->size, j->hex) != 0) j->rc = STORAGE_EIO;
        close(fd);
        break;
    }
    case FS_DELETE:
        if (unlink(j->path) != 0 && errno != ENOENT) {
            j->rc = STORAGE_EIO;
            break;
        }
        /* The key's own <uuid> directory goes too when it is empty now. */
        char *slash = strrchr(j->path, '/');
        if (slash) {
            *slash = '\0';
            rmdir(j->path);
        }
        break;
    case FS_CHECK: {
        int fd = open(j->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 && errno == ENOENT && mkdirs_for(j->path) == 0)
            fd = open(j->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0 || write(fd, "ok", 2) != 2) j->rc = STORAGE_EIO;
        if (fd >= 0) close(fd);
        if (unlink(j->path) != 0) j->rc = STORAGE_EIO;
        break;
    }
    }
}

static void on_fs_done(uv_work_t *w, int status)
{
    fsjob_t *j = container_of(w, fsjob_t, work);
    if (status != 0) j->rc = STORAGE_EIO;
    if (j->rc == STORAGE_EIO) log_warn("storage: local %d on %s failed", j->op, j->path);
    if (j->stat_cb) j->stat_cb(j->rc, j->size, j->data);
    if (j->hash_cb) j->hash_cb(j->rc, j->size, j->rc == 0 ? j->hex : NULL, j->data);
    if (j->done_cb) j->done_cb(j->rc, j->data);
    free(j->path);
    free(j);
}

static void fs_start(fsjob_t *j)
{
    if (uv_queue_work(S.loop, &j->work, on_fs_work, on_fs_done) != 0) {
        /* Never call back from inside the caller: queue a job that fails. */
        j->op = -1;
        j->rc = STORAGE_EIO;
        if (uv_queue_work(S.loop, &j->work, on_fs_work, on_fs_done) != 0) abort();
    }
}

static fsjob_t *fsjob_new(int op, const char *key)
{
    fsjob_t *j = xcalloc(1, sizeof(*j));
    j->op = op;
    size_t n = strlen(cfg.storage_dir) + strlen(key) + 2;
    j->path = xmalloc(n);
    snprintf(j->path, n, "%s/%s", cfg.storage_dir, key);
    return j;
}

/* ---- S3 requests (curl multi, header-signed) ---- */

enum { S3_STAT, S3_HASH, S3_DELETE, S3_CHECK };

typedef struct s3job {
    int op;
    struct curl_slist *headers;
    mbedtls_sha256_context sha;
    uint64_t size;
    storage_stat_cb stat_cb;
    storage_hash_cb hash_cb;
    storage_done_cb done_cb;
    void *data;
} s3job_t;

/* An easy handle for METHOD on key ("" for the bucket), signed now; headers in *h. */
static CURL *s3_easy(const char *method, const char *key, struct curl_slist **h)
{
    char date[SIGV4_AMZ_DATE_LEN + 1];
    sigv4_amz_date((int64_t)time(NULL) * 1000, date);
    sigv4_presign_t p = {.method = method,
                         .endpoint = S.endpoint,
                         .region = S.region,
                         .bucket = cfg.s3_bucket,
                         .key = key,
                         .access_key = cfg.s3_access_key_id,
                         .secret_key = cfg.s3_secret_access_key,
                         .amz_date = date,
                         .path_style = cfg.s3_force_path_style};
    sigv4_signed_t s;
    *h = NULL;
    if (!s3_configured() || sigv4_sign_headers(&p, &s) != 0) return NULL;
    char line[1024];
    snprintf(line, sizeof line, "Authorization: %s", s.authorization);
    *h = curl_slist_append(*h, line);
    snprintf(line, sizeof line, "x-amz-date: %s", date);
    *h = curl_slist_append(*h, line);
    *h = curl_slist_append(*h, "x-amz-content-sha256: " SIGV4_UNSIGNED_PAYLOAD);
    *h = curl_slist_append(*h, "Expect:");
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, s.url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, *h);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    if (strcmp(method, "HEAD") == 0) curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    if (strcmp(method, "DELETE") == 0) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    free(s.url);
    free(s.authorization);
    return e;
}

static size_t on_s3_discard(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ptr;
    (void)ud;
    return size * n;
}

static size_t on_s3_hash_data(char *ptr, size_t size, size_t n, void *ud)
{
    s3job_t *j = ud;
    mbedtls_sha256_update_ret(&j->sha, (const unsigned char *)ptr, size * n);
    j->size += size * n;
    return size * n;
}

static void on_s3_done(CURL *e, CURLcode code, long status, void *data)
{
    s3job_t *j = data;
    int rc = 0;
    if (code != CURLE_OK || status == 0)
        rc = STORAGE_EIO;
    else if (status == 404)
        rc = j->op == S3_DELETE ? 0 : STORAGE_ENOENT;
    else if (status < 200 || status >= 300)
        rc = STORAGE_EIO;
    if (rc == STORAGE_EIO)
        log_warn("storage: S3 op %d failed (curl %d, HTTP %ld)", j->op, code, status);
    if (j->op == S3_STAT && rc == 0) {
        curl_off_t len = -1;
        curl_easy_getinfo(e, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &len);
        j->size = len < 0 ? 0 : (uint64_t)len;
    }
    curl_easy_cleanup(e);
    curl_slist_free_all(j->headers);
    if (j->stat_cb) j->stat_cb(rc, j->size, j->data);
    if (j->hash_cb) {
        uint8_t digest[CRYPTO_SHA256_LEN];
        char hex[CRYPTO_SHA256_HEX_LEN + 1];
        mbedtls_sha256_finish_ret(&j->sha, digest);
        crypto_hex_encode(digest, sizeof digest, hex);
        j->hash_cb(rc, j->size, rc == 0 ? hex : NULL, j->data);
    }
    if (j->done_cb) j->done_cb(rc, j->data);
    mbedtls_sha256_free(&j->sha);
    free(j);
}

static void s3_start(s3job_t *j, const char *method, const char *key, long timeout_ms)
{
    mbedtls_sha256_init(&j->sha);
    mbedtls_sha256_starts_ret(&j->sha, 0);
    CURL *e = s3_easy(method, key, &j->headers);
    if (!e) {
        curlm_fail(curl_easy_init(), CURLE_FAILED_INIT, on_s3_done, j);
        return;
    }
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
    if (j->op == S3_HASH) {
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_s3_hash_data);
        curl_easy_setopt(e, CURLOPT_WRITEDATA, j);
    } else {
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_s3_discard);
    }
    curlm_add(e, on_s3_done, j);
}

/* ---- public async calls ---- */

void storage_stat(const char *key, storage_stat_cb cb, void *data)
{
    if (S.local) {
        fsjob_t *j = fsjob_new(FS_STAT, key);
        j->stat_cb = cb;
        j->data = data;
        fs_start(j);
        return;
    }
    s3job_t *j = xcalloc(1, sizeof(*j));
    j->op = S3_STAT;
    j->stat_cb = cb;
    j->data = data;
    s3_start(j, "HEAD", key, 15000L);
}

void storage_hash(const char *key, storage_hash_cb cb, void *data)
{
    if (S.local) {
        fsjob_t *j = fsjob_new(FS_HASH, key);
        j->hash_cb = cb;
        j->data = data;
        fs_start(j);
        return;
    }
    s3job_t *j = xcalloc(1, sizeof(*j));
    j->op = S3_HASH;
    j->hash_cb = cb;
    j->data = data;
    s3_start(j, "GET", key, 600000L);
}

void storage_delete(const char *key, storage_done_cb cb, void *data)
{
    if (S.local) {
        fsjob_t *j = fsjob_new(FS_DELETE, key);
        j->done_cb = cb;
        j->data = data;
        fs_start(j);
        return;
    }
    s3job_t *j = xcalloc(1, sizeof(*j));
    j->op = S3_DELETE;
    j->done_cb = cb;
    j->data = data;
    s3_start(j, "DELETE", key, 15000L);
}

void storage_check(storage_done_cb cb, void *data)
{
    if (S.local) {
        uint8_t rnd[8];
        char name[40];
        random_bytes(rnd, sizeof rnd);
        memcpy(name, ".probe-", 7);
        crypto_hex_encode(rnd, sizeof rnd, name + 7);
        fsjob_t *j = fsjob_new(FS_CHECK, name);
        j->done_cb = cb;
        j->data = data;
        fs_start(j);
        return;
    }
    s3job_t *j = xcalloc(1, sizeof(*j));
    j->op = S3_CHECK;
    j->done_cb = cb;
    j->data = data;
    s3_start(j, "HEAD", "", 5000L);
}

/* ---- streaming writer ---- */

enum { W_WRITE, W_FINAL, W_READ, W_DISCARD };

struct storage_writer {
    uv_work_t work;
    int op; /* of the job in flight */
    bool inflight, want_drain, finishing, aborted, failed, done;
    void (*on_drain)(void *data);
    void *drain_data;
    char *cur, *job;
    size_t cur_len, cur_cap, job_len, job_cap;
    int fd;
    int job_rc;
    char tmp[4096];
    char dest[4096];
    uint64_t size; /* bytes given */
    mbedtls_sha256_context sha;
    char hex[CRYPTO_SHA256_HEX_LEN + 1];
    char *key, *mime;
    storage_hash_cb cb;
    void *cb_data;
    /* s3: the PUT reads the temporary file back through W_READ jobs */
    CURL *easy;
    struct curl_slist *headers;
    uint64_t read_off;
    size_t rpos;
    bool put_paused;
};

static void writer_submit(storage_writer_t *w, int op);
static void on_writer_done(uv_work_t *work, int status);

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -errno;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* Moves from to to unless to exists (-EEXIST then): renameat2 where the file system has it,
 * else link + unlink, which is as atomic for this purpose. Two uploads racing on one key: one
 * wins, the other gets -EEXIST. Pool thread. */
static int rename_noreplace(const char *from, const char *to)
{
#ifdef RENAME_NOREPLACE
    if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0) return 0;
    if (errno != EINVAL && errno != ENOSYS) return -errno;
#endif
    if (link(from, to) != 0) return -errno;
    unlink(from);
    return 0;
}

static void on_writer_work(uv_work_t *work)
{
    storage_writer_t *w = container_of(work, storage_writer_t, work);
    w->job_rc = 0;
    if (w->op == W_DISCARD) {
        if (w->fd >= 0) close(w->fd);
        w->fd = -1;
        if (w->tmp[0]) unlink(w->tmp);
        return;
    }
    if (w->op == W_READ) {
        ssize_t r;
        do
            r = pread(w->fd, w->job, w->job_cap, (off_t)w->read_off);
        while (r < 0 && errno == EINTR);
        w->job_rc = r < 0 ? -errno : 0;
        w->job_len = r < 0 ? 0 : (size_t)r;
        return;
    }
    if (w->failed) return;
    if (w->fd < 0) {
        w->fd = open(w->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w->fd < 0 && errno == ENOENT && mkdirs_for(w->tmp) == 0)
            w->fd = open(w->tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (w->fd < 0) {
            w->job_rc = -errno;
            return;
        }
    }
    if (w->job_len) {
        w->job_rc = write_all(w->fd, w->job, w->job_len);
        if (w->job_rc != 0) return;
        mbedtls_sha256_update_ret(&w->sha, (const unsigned char *)w->job, w->job_len);
    }
    if (w->op != W_FINAL) return;
    uint8_t digest[CRYPTO_SHA256_LEN];
    mbedtls_sha256_finish_ret(&w->sha, digest);
    crypto_hex_encode(digest, sizeof digest, w->hex);
    if (w->dest[0]) { /* local: move into place, never over an existing object */
        int rc = mkdirs_for(w->dest);
        if (rc == 0) rc = rename_noreplace(w->tmp, w->dest);
        if (rc != 0) {
            w->job_rc = rc;
            return;
        }
        w->tmp[0] = '\0';
        close(w->fd);
        w->fd = -1;
    }
}

static void writer_free(storage_writer_t *w)
{
    mbedtls_sha256_free(&w->sha);
    free(w->cur);
    free(w->job);
    free(w->key);
    free(w->mime);
    free(w);
}

static void writer_submit(storage_writer_t *w, int op)
{
    if (op == W_WRITE || op == W_FINAL) {
        /* The filled buffer becomes the job's; the caller fills the other meanwhile. */
        char *b = w->job;
        size_t cap = w->job_cap;
        w->job = w->cur;
        w->job_cap = w->cur_cap;
        w->job_len = w->cur_len;
        w->cur = b;
        w->cur_cap = cap;
        w->cur_len = 0;
    }
    w->op = op;
    w->inflight = true;
    if (uv_queue_work(S.loop, &w->work, on_writer_work, on_writer_done) != 0) abort();
}

storage_writer_t *storage_writer_new(void (*on_drain)(void *data), void *data)
{
    storage_writer_t *w = xcalloc(1, sizeof(*w));
    w->on_drain = on_drain;
    w->drain_data = data;
    w->fd = -1;
    w->cur_cap = w->job_cap = STORAGE_WRITER_CHUNK;
    w->cur = xmalloc(w->cur_cap);
    w->job = xmalloc(w->job_cap);
    uint8_t rnd[12];
    char hex[25];
    random_bytes(rnd, sizeof rnd);
    crypto_hex_encode(rnd, sizeof rnd, hex);
    snprintf(w->tmp, sizeof w->tmp, "%s/.tmp/%s-%ld-%s.part", cfg.storage_dir, S.host,
             (long)getpid(), hex);
    mbedtls_sha256_init(&w->sha);
    mbedtls_sha256_starts_ret(&w->sha, 0);
    return w;
}

bool storage_writer_write(storage_writer_t *w, const void *buf, size_t len)
{
    if (w->failed || w->aborted || w->finishing) return false;
    if (w->cur_len + len > w->cur_cap) {
        size_t cap = w->cur_cap;
        while (cap < w->cur_len + len)
            cap *= 2;
        w->cur = xrealloc(w->cur, cap);
        w->cur_cap = cap;
    }
    memcpy(w->cur + w->cur_len, buf, len);
    w->cur_len += len;
    w->size += len;
    if (!w->inflight && w->cur_len >= STORAGE_WRITER_CHUNK) writer_submit(w, W_WRITE);
    if (w->cur_len >= STORAGE_WRITER_CHUNK) {
        w->want_drain = true;
        return true;
    }
    return false;
}

uint64_t storage_writer_size(const storage_writer_t *w)
{
    return w->size;
}

static void writer_report(storage_writer_t *w, int rc)
{
    storage_hash_cb cb = w->cb;
    w->cb = NULL;
    if (cb) cb(rc, w->size, rc == 0 ? w->hex : NULL, w->cb_data);
}

static void on_put_done(CURL *e, CURLcode code, long status, void *data);

static size_t on_put_read(char *dst, size_t size, size_t n, void *ud)
{
    storage_writer_t *w = ud;
    size_t want = size * n;
    if (w->failed) return CURL_READFUNC_ABORT;
    if (w->rpos < w->job_len && !w->inflight) {
        size_t k = w->job_len - w->rpos < want ? w->job_len - w->rpos : want;
        memcpy(dst, w->job + w->rpos, k);
        w->rpos += k;
        return k;
    }
    if (w->read_off >= w->size) return 0;
    if (!w->inflight) writer_submit(w, W_READ);
    w->put_paused = true;
    return CURL_READFUNC_PAUSE;
}

static void s3_put_start(storage_writer_t *w)
{
    CURL *e = s3_easy("PUT", w->key, &w->headers);
    if (!e) {
        w->failed = true;
        curlm_fail(curl_easy_init(), CURLE_FAILED_INIT, on_put_done, w);
        return;
    }
    char line[300];
    snprintf(line, sizeof line, "Content-Type: %s", w->mime);
    w->headers = curl_slist_append(w->headers, line);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, w->headers);
    curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)w->size);
    curl_easy_setopt(e, CURLOPT_READFUNCTION, on_put_read);
    curl_easy_setopt(e, CURLOPT_READDATA, w);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_s3_discard);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 600000L);
    w->easy = e;
    w->read_off = 0;
    w->rpos = w->job_len = 0;
    curlm_add(e, on_put_done, w);
}

static void on_put_done(CURL *e, CURLcode code, long status, void *data)
{
    storage_writer_t *w = data;
    curl_easy_cleanup(e);
    curl_slist_free_all(w->headers);
    w->headers = NULL;
    w->easy = NULL;
    bool ok = code == CURLE_OK && status >= 200 && status < 300 && !w->failed;
    if (!ok) log_warn("storage: S3 PUT of %s failed (curl %d, HTTP %ld)", w->key, code, status);
    writer_report(w, ok ? 0 : STORAGE_EIO);
    w->done = true;
    if (w->inflight) return; /* a read is still running: on_writer_done discards */
    writer_submit(w, W_DISCARD);
}

static void on_writer_done(uv_work_t *work, int status)
{
    storage_writer_t *w = container_of(work, storage_writer_t, work);
    int op = w->op;
    w->inflight = false;
    if (op == W_DISCARD) {
        writer_free(w);
        return;
    }
    if (status != 0 && w->job_rc == 0) w->job_rc = -1;
    if (w->aborted || w->done) {
        writer_submit(w, W_DISCARD);
        return;
    }
    if (op == W_READ) {
        if (w->job_rc != 0) {
            w->failed = true;
        } else {
            w->read_off += w->job_len;
            w->rpos = 0;
            if (w->job_len == 0) w->failed = true; /* the file is shorter than it was */
        }
        if (w->put_paused && w->easy) {
            w->put_paused = false;
            curl_easy_pause(w->easy, CURLPAUSE_CONT);
        }
        return;
    }
    bool exists = op == W_FINAL && w->job_rc == -EEXIST;
    if (w->job_rc != 0 && !exists) {
        if (!w->failed) log_warn("storage: writing %s failed: %s", w->tmp, strerror(-w->job_rc));
        w->failed = true;
    }
    if (op == W_FINAL) {
        if (exists) {
            writer_report(w, STORAGE_EEXIST);
            writer_submit(w, W_DISCARD);
        } else if (w->failed) {
            writer_report(w, STORAGE_EIO);
            writer_submit(w, W_DISCARD);
        } else if (w->dest[0]) {
            writer_report(w, 0);
            writer_submit(w, W_DISCARD); /* closes nothing left: frees the writer */
        } else {
            s3_put_start(w);
        }
        return;
    }
    if (w->finishing) {
        writer_submit(w, W_FINAL);
        return;
    }
    if (w->cur_len >= STORAGE_WRITER_CHUNK && !w->failed) {
        writer_submit(w, W_WRITE);
        return;
    }
    if (w->want_drain) {
        w->want_drain = false;
        if (w->on_drain) w->on_drain(w->drain_data);
    }
}

void storage_writer_finish(storage_writer_t *w, const char *key, const char *mime_type,
                           storage_hash_cb cb, void *data)
{
    w->finishing = true;
    w->key = xstrdup(key);
    w->mime = xstrdup(mime_type);
    w->cb = cb;
    w->cb_data = data;
    if (S.local) snprintf(w->dest, sizeof w->dest, "%s/%s", cfg.storage_dir, key);
    if (!w->inflight) writer_submit(w, W_FINAL);
}

void storage_writer_abort(storage_writer_t *w)
{
    if (!w) return;
    w->aborted = true;
    w->cb = NULL;
    w->on_drain = NULL;
    if (!w->inflight) writer_submit(w, W_DISCARD);
}

/*
 * Atomic file writes for the development sinks (see filesink.h): open (O_EXCL) -> write (again
 * after a short write) -> close -> rename, or on a failure close -> unlink; one uv_fs_t reused
 * for each step.
 */
#include "rt/filesink.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/log.h"
#include "core/mem.h"
#include "core/random.h"

typedef struct filesink_job {
    uv_fs_t fs;
    uv_work_t work; /* the folder made again, off the loop (on_open) */
    uv_file file;
    bool remade;
    int mkdir_rc;
    const char *label;
    const char *bytes;
    size_t len, off;
    int rc; /* FILESINK_EOPEN / FILESINK_EWRITE once a step failed */
    char *dir, *tmp_path, *path;
    filesink_cb cb;
    void *data;
} filesink_job_t;

static void on_open(uv_fs_t *req);
static void on_write(uv_fs_t *req);
static void on_close(uv_fs_t *req);
static void on_rename(uv_fs_t *req);
static void on_unlink(uv_fs_t *req);

int filesink_mkdir(const char *dir)
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
    /* An existing file of that name is not a folder: every write would fail later. */
    struct stat st;
    if (rc == 0) {
        if (stat(p, &st) != 0) {
            rc = -1;
        } else if (!S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            rc = -1;
        }
    }
    int saved = errno;
    free(p);
    errno = saved;
    return rc;
}

static void job_end(filesink_job_t *j, int rc)
{
    filesink_cb cb = j->cb;
    void *data = j->data;

    free(j->dir);
    free(j->tmp_path);
    free(j->path);
    free(j);
    cb(rc, data);
}

static int open_tmp(uv_loop_t *loop, filesink_job_t *j)
{
    return uv_fs_open(loop, &j->fs, j->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644,
                      on_open);
}

/* The folder was removed while the server runs (a developer clearing the messages): it is made
 * again, once per file, in the thread pool, and the open retried. */
static void remake_work(uv_work_t *w)
{
    filesink_job_t *j = w->data;
    j->mkdir_rc = filesink_mkdir(j->dir) == 0 ? 0 : errno;
}

static void remake_done(uv_work_t *w, int status)
{
    filesink_job_t *j = w->data;
    if (status != 0 || j->mkdir_rc != 0) {
        log_error("%s: cannot make %s again: %s", j->label, j->dir,
                  status != 0 ? uv_strerror(status) : strerror(j->mkdir_rc));
        job_end(j, FILESINK_EOPEN);
        return;
    }
    log_info("%s: %s was missing: made again", j->label, j->dir);
    if (open_tmp(w->loop, j) != 0) job_end(j, FILESINK_EOPEN);
}

int filesink_write(uv_loop_t *loop, const char *label, const char *dir, const char *ext,
                   const char *bytes, size_t len, filesink_cb cb, void *data)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[8];
    char rnd[2 * sizeof(r) + 1], name[96];
    uv_timeval64_t tv;

    uv_gettimeofday(&tv);
    random_bytes(r, sizeof(r));
    for (size_t i = 0; i < sizeof(r); i++) {
        rnd[2 * i] = hex[r[i] >> 4];
        rnd[2 * i + 1] = hex[r[i] & 15];
    }
    rnd[2 * sizeof(r)] = '\0';
    if (snprintf(name, sizeof(name), "%lld%03d-%s%s", (long long)tv.tv_sec,
                 (int)(tv.tv_usec / 1000), rnd, ext) >= (int)sizeof(name))
        return UV_ENAMETOOLONG;

    filesink_job_t *j = xcalloc(1, sizeof(*j));
    size_t n = strlen(dir) + strlen(name) + 8;
    j->path = xmalloc(n);
    snprintf(j->path, n, "%s/%s", dir, name);
    j->tmp_path = xmalloc(n);
    snprintf(j->tmp_path, n, "%s/.%s.tmp", dir, name);
    j->dir = xstrdup(dir);
    j->label = label;
    j->bytes = bytes;
    j->len = len;
    j->cb = cb;
    j->data = data;
    j->fs.data = j;
    int rc = open_tmp(loop, j);
    if (rc != 0) {
        free(j->dir);
        free(j->tmp_path);
        free(j->path);
        free(j);
    }
    return rc;
}

static void on_open(uv_fs_t *req)
{
    filesink_job_t *j = req->data;

    if (req->result == UV_ENOENT && !j->remade) {
        uv_loop_t *loop = req->loop;
        uv_fs_req_cleanup(req);
        j->remade = true;
        j->work.data = j;
        if (uv_queue_work(loop, &j->work, remake_work, remake_done) != 0)
            job_end(j, FILESINK_EOPEN);
        return;
    }
    if (req->result < 0) {
        log_error("%s: open %s: %s", j->label, j->tmp_path, uv_strerror((int)req->result));
        uv_fs_req_cleanup(req);
        job_end(j, FILESINK_EOPEN);
        return;
    }
    j->file = (uv_file)req->result;
    uv_fs_req_cleanup(req);
    uv_buf_t b = uv_buf_init((char *)j->bytes, (unsigned)j->len);
    uv_fs_write(req->loop, &j->fs, j->file, &b, 1, 0, on_write);
}

static void on_write(uv_fs_t *req)
{
    filesink_job_t *j = req->data;
    uv_loop_t *loop = req->loop;

    if (req->result < 0 || (req->result == 0 && j->len > 0)) { /* 0 of some: would loop forever */
        log_error("%s: write %s: %s", j->label, j->tmp_path,
                  req->result < 0 ? uv_strerror((int)req->result) : "nothing written");
        j->rc = FILESINK_EWRITE;
    } else {
        j->off += (size_t)req->result;
    }
    uv_fs_req_cleanup(req);
    if (!j->rc && j->off < j->len) { /* short write: go on */
        uv_buf_t b = uv_buf_init((char *)j->bytes + j->off, (unsigned)(j->len - j->off));
        uv_fs_write(loop, &j->fs, j->file, &b, 1, (int64_t)j->off, on_write);
        return;
    }
    uv_fs_close(loop, &j->fs, j->file, on_close);
}

static void on_close(uv_fs_t *req)
{
    filesink_job_t *j = req->data;
    uv_loop_t *loop = req->loop;

    if (req->result < 0 && !j->rc) { /* a write the file system reports only at close */
        log_error("%s: close %s: %s", j->label, j->tmp_path, uv_strerror((int)req->result));
        j->rc = FILESINK_EWRITE;
    }
    uv_fs_req_cleanup(req);
    if (j->rc) {
        uv_fs_unlink(loop, &j->fs, j->tmp_path, on_unlink);
        return;
    }
    uv_fs_rename(loop, &j->fs, j->tmp_path, j->path, on_rename);
}

static void on_rename(uv_fs_t *req)
{
    filesink_job_t *j = req->data;
    int rc = (int)req->result;

    if (rc < 0) {
        log_error("%s: rename %s: %s", j->label, j->path, uv_strerror(rc));
        j->rc = FILESINK_EWRITE;
        uv_loop_t *loop = req->loop;
        uv_fs_req_cleanup(req);
        uv_fs_unlink(loop, &j->fs, j->tmp_path, on_unlink);
        return;
    }
    uv_fs_req_cleanup(req);
    log_debug("%s: wrote %s", j->label, j->path);
    job_end(j, 0);
}

static void on_unlink(uv_fs_t *req)
{
    filesink_job_t *j = req->data;

    uv_fs_req_cleanup(req);
    job_end(j, j->rc);
}

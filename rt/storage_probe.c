/* Storage reachability for /api/health (see storage_probe.h). */
#include "rt/storage_probe.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "core/config.h"
#include "core/http.h"
#include "core/log.h"
#include "core/mem.h"
#include "domain/sigv4.h"
#include "rt/curlm.h"

typedef struct probe {
    uv_fs_t fs;
    void (*cb)(bool ok, void *data);
    void *data;
} probe_t;

static void on_access(uv_fs_t *fs)
{
    probe_t *p = container_of(fs, probe_t, fs);
    bool ok = fs->result == 0;
    if (!ok)
        log_warn("health: storage dir %s not writable: %s", cfg.storage_dir,
                 uv_strerror((int)fs->result));
    uv_fs_req_cleanup(fs);
    p->cb(ok, p->data);
    free(p);
}

static void on_head(CURL *easy, CURLcode code, long status, void *data)
{
    probe_t *p = data;
    curl_easy_cleanup(easy);
    bool ok = code == CURLE_OK && status >= 200 && status < 300;
    if (!ok) log_warn("health: S3 bucket probe failed (curl %d, HTTP %ld)", (int)code, status);
    p->cb(ok, p->data);
    free(p);
}

void storage_probe(void (*cb)(bool ok, void *data), void *data)
{
    probe_t *p = xcalloc(1, sizeof(*p));
    p->cb = cb;
    p->data = data;
    if (strcmp(cfg.storage_driver, "s3") != 0) {
        if (uv_fs_access(http_loop(), &p->fs, cfg.storage_dir, W_OK, on_access) != 0) {
            free(p);
            cb(false, data);
        }
        return;
    }
    char date[SIGV4_AMZ_DATE_LEN + 1];
    sigv4_amz_date((int64_t)time(NULL) * 1000, date);
    sigv4_presign_t ps = {.method = "HEAD",
                          .endpoint = cfg.s3_endpoint,
                          .region = cfg.s3_region,
                          .bucket = cfg.s3_bucket,
                          .key = "",
                          .access_key = cfg.s3_access_key_id,
                          .secret_key = cfg.s3_secret_access_key,
                          .amz_date = date,
                          .expires = 60,
                          .path_style = cfg.s3_force_path_style};
    char *url = NULL;
    if (!cfg.s3_endpoint || sigv4_presign_url(&ps, &url) != 0) {
        free(p);
        cb(false, data);
        return;
    }
    CURL *e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, 3000L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    free(url);
    curlm_add(e, on_head, p);
}

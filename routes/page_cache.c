#include "routes/page_cache.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/mem.h"
#include "routes/file_urls.h"

const char *page_cache_key(http_req_t *req, int n, const char *const *fields)
{
    buf_t b = BUF_INIT;
    for (int i = 0; i < n; i++) {
        if (!fields[i])
            buf_puts(&b, "-;");
        else
            buf_printf(&b, "%zu:%s;", strlen(fields[i]), fields[i]);
    }
    const char *key = arena_strndup(&req->arena, b.data, b.len);
    buf_free(&b);
    return key;
}

long long page_row_version(const db_result_t *r, int col)
{
    return db_isnull(r, 0, col) ? PAGE_NO_VERSION : db_getll(r, 0, col, PAGE_NO_VERSION);
}

static page_entry_t *page_slot(page_cache_t *c, const char *key)
{
    return &c->slots[fnv1a(key) % PAGE_CACHE_SLOTS];
}

static page_entry_t *page_get(page_cache_t *c, const char *key)
{
    page_entry_t *e = page_slot(c, key);
    return e->key && strcmp(e->key, key) == 0 ? e : NULL;
}

bool page_cache_has(page_cache_t *c, const char *key)
{
    return page_get(c, key) != NULL;
}

const page_entry_t *page_cache_get(page_cache_t *c, const char *key, long long version)
{
    page_entry_t *e = page_get(c, key);
    return e && e->version == version ? e : NULL;
}

bool page_cache_reply(page_cache_t *c, const char *key, long long version, http_req_t *req)
{
    page_entry_t *e = page_get(c, key);
    if (!e || e->version != version) return false;
    /* A page without references is sent as stored: the reply's filter would scan it all (a
     * page is tens of KB) to find none. */
    req->body_plain = !e->refs;
    req->body_compact = true;
    http_reply_jsonn(req, 200, e->body, e->len);
    return true;
}

void page_cache_put(page_cache_t *c, const char *key, long long version, const char *body,
                    size_t len)
{
    if (len > PAGE_CACHE_MAX_BODY) return;
    page_entry_t *e = page_slot(c, key);
    free(e->key);
    free(e->body);
    c->bytes -= e->len;
    *e = (page_entry_t){0};
    if (c->bytes + len > PAGE_CACHE_MAX_BYTES) return;
    e->key = xstrdup(key);
    e->version = version;
    e->body = xmalloc(len);
    /* Stored compact, so a hit is sent without the reply's scan (core/json.h). */
    e->len = json_compact(e->body, body, len);
    c->bytes += e->len;
    e->refs = file_urls_needed(e->body, e->len, FILE_URLS_REFS);
}

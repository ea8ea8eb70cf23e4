/* Stored files as presigned URLs in JSON text (see file_urls.h). */
#include "routes/file_urls.h"

#include <jansson.h>
#include <string.h>

#include "core/arena.h"
#include "core/buf.h"
#include "rt/storage.h"

#define REF_MARK "\"storage:" /* storage_ref_make's prefix, as a JSON string starts */
#define KEY_MARK "\"_key\""
#define MAX_DEPTH 64 /* deeper objects are copied as they are */

bool file_urls_needed(const char *json, size_t len, int what)
{
    return ((what & FILE_URLS_REFS) && memmem(json, len, REF_MARK, sizeof(REF_MARK) - 1)) ||
           ((what & FILE_URLS_KEYS) && memmem(json, len, KEY_MARK, sizeof(KEY_MARK) - 1));
}

/* The offset just past the string that starts at s[i] (a quote); n when it is not closed. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\')
            i++;
        else if (s[i] == '"')
            return i + 1;
    }
    return n;
}

static size_t skip_ws(const char *s, size_t n, size_t i)
{
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
        i++;
    return i;
}

static bool token_is(const char *s, size_t a, size_t b, const char *lit)
{
    size_t n = strlen(lit);
    return b - a == n && memcmp(s + a, lit, n) == 0;
}

/* A JSON string token's value (arena), or NULL for null and anything that is not a string. */
static const char *string_value(arena_t *a, const char *s, size_t from, size_t to)
{
    if (to - from < 2 || s[from] != '"' || s[to - 1] != '"') return NULL;
    if (!memchr(s + from, '\\', to - from)) return arena_strndup(a, s + from + 1, to - from - 2);
    json_error_t err;
    json_t *j = json_loadb(s + from, to - from, JSON_DECODE_ANY, &err);
    const char *v = json_is_string(j) ? arena_strdup(a, json_string_value(j)) : NULL;
    json_decref(j);
    return v;
}

typedef struct {
    size_t filename[2], mime[2]; /* value tokens of the object's members; [0] == [1]: none */
} object_t;

const char *file_urls_render(http_req_t *req, const char *json, size_t len, int what,
                             size_t *out_len)
{
    *out_len = len;
    if (!json || !file_urls_needed(json, len, what)) return json;
    object_t stack[MAX_DEPTH];
    int depth = 0;
    buf_t b = BUF_INIT;
    size_t copied = 0, i = 0;
    bool changed = false;
    while (i < len) {
        char c = json[i];
        if (c == '{') {
            if (depth < MAX_DEPTH) stack[depth] = (object_t){{0, 0}, {0, 0}};
            depth++;
            i++;
            continue;
        }
        if (c == '}') {
            if (depth > 0) depth--;
            i++;
            continue;
        }
        if (c != '"') {
            i++;
            continue;
        }
        size_t name_at = i, end = string_end(json, len, i);
        size_t colon = skip_ws(json, len, end);
        if (colon >= len || json[colon] != ':') {
            /* A value: a storage reference renders as its URL. */
            if ((what & FILE_URLS_REFS) && end - i > sizeof(REF_MARK) &&
                memcmp(json + i, REF_MARK, sizeof(REF_MARK) - 1) == 0 &&
                !memchr(json + i + 1, '\\', end - i - 2)) {
                char *url =
                    storage_ref_render(&req->arena, json + i + 1, end - i - 2, STORAGE_URL_TTL);
                if (url) {
                    buf_append(&b, json + copied, i - copied);
                    buf_json_str(&b, url);
                    copied = end;
                    changed = true;
                }
            }
            i = end;
            continue;
        }
        /* A member's name: with FILE_URLS_KEYS, note filename and mimeType, render _key. */
        i = colon + 1;
        object_t *o = depth > 0 && depth <= MAX_DEPTH ? &stack[depth - 1] : NULL;
        if (!(what & FILE_URLS_KEYS) || !o) continue;
        int member = token_is(json, name_at, end, "\"filename\"")   ? 1
                     : token_is(json, name_at, end, "\"mimeType\"") ? 2
                     : token_is(json, name_at, end, KEY_MARK)       ? 3
                                                                    : 0;
        if (!member) continue; /* the main loop walks the value (a reference, maybe) */
        size_t v = skip_ws(json, len, colon + 1), vend;
        if (v < len && json[v] == '"')
            vend = string_end(json, len, v);
        else if (len - v >= 4 && memcmp(json + v, "null", 4) == 0)
            vend = v + 4;
        else
            continue; /* neither string nor null: not one of ours */
        i = vend;
        if (member == 1) {
            o->filename[0] = v, o->filename[1] = vend;
        } else if (member == 2) {
            o->mime[0] = v, o->mime[1] = vend;
        } else {
            const char *key = string_value(&req->arena, json, v, vend);
            const char *name = string_value(&req->arena, json, o->filename[0], o->filename[1]);
            const char *mime = string_value(&req->arena, json, o->mime[0], o->mime[1]);
            char *url = key && name && mime
                            ? storage_presign_get(&req->arena, key, name, mime, STORAGE_URL_TTL)
                            : NULL;
            buf_append(&b, json + copied, name_at - copied);
            buf_puts(&b, "\"url\"");
            buf_append(&b, json + end, v - end); /* the separator as it was */
            if (url)
                buf_json_str(&b, url);
            else
                buf_puts(&b, "null");
            copied = vend;
            changed = true;
        }
    }
    if (!changed) {
        buf_free(&b);
        return json;
    }
    buf_append(&b, json + copied, len - copied);
    char *out = arena_strndup(&req->arena, b.data, b.len);
    *out_len = b.len;
    buf_free(&b);
    return out;
}

const char *file_urls_body_filter(http_req_t *req, const char *body, size_t len, size_t *out_len)
{
    return file_urls_render(req, body, len, FILE_URLS_REFS, out_len);
}

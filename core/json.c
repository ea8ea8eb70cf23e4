/* Request-body JSON parsing with the error replies of docs/api.md. */
#include "core/json.h"

#include <string.h>

/* Byte classes of the scans: outside strings a quote opens one and white space is what
 * compaction drops; inside, a quote closes the string and a backslash escapes the next byte.
 * Table-driven, as every JSON answer is scanned once (core/http.c). */
enum { JC_PLAIN = 0, JC_QUOTE = 1, JC_SPACE = 2, JC_ESCAPE = 2 };
static const unsigned char outside[256] = {
    ['"'] = JC_QUOTE, [' '] = JC_SPACE, ['\n'] = JC_SPACE, ['\t'] = JC_SPACE, ['\r'] = JC_SPACE};
static const unsigned char inside[256] = {['"'] = JC_QUOTE, ['\\'] = JC_ESCAPE};

static bool json_ws(char c)
{
    return outside[(unsigned char)c] == JC_SPACE;
}

/* The offset just past the string whose opening quote is at s[i]: the closing quote's next, or
 * n when the string is not closed. */
static size_t string_end(const char *s, size_t n, size_t i)
{
    const unsigned char *u = (const unsigned char *)s;
    for (i++;;) {
        while (i < n && inside[u[i]] == JC_PLAIN)
            i++;
        if (i >= n) return n;
        if (u[i] == '"') return i + 1;
        i += 2; /* the backslash and the byte it escapes */
    }
}

size_t json_space_at(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0;;) {
        while (i < n && outside[u[i]] == JC_PLAIN)
            i++;
        if (i >= n) return n;
        if (outside[u[i]] == JC_SPACE) return i;
        i = string_end(s, n, i);
    }
}

size_t json_compact(char *dst, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] == '"') {
            size_t e = string_end(s, n, i);
            memmove(dst + o, s + i, e - i);
            o += e - i;
            i = e;
        } else if (json_ws(s[i])) {
            i++;
        } else {
            dst[o++] = s[i++];
        }
    }
    return o;
}

void buf_json_compact(buf_t *b, const char *s, size_t n)
{
    buf_reserve(b, n);
    b->len += json_compact(b->data + b->len, s, n);
    b->data[b->len] = '\0';
}

static void json_release(void *p)
{
    json_decref((json_t *)p);
}

bool json_body_ok_or_reply(http_req_t *req, json_t **body)
{
    *body = NULL;
    json_t *root;
    if (!req->body || req->body_len == 0) {
        root = json_object();
    } else {
        json_error_t err;
        /* Reject NUL bytes and duplicate keys: either usually means a confused client. */
        root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &err);
        if (!root) {
            http_reply_error(req, 400, "VALIDATION_ERROR", "Malformed JSON body");
            return false;
        }
    }
    arena_on_free(&req->arena, json_release, root);
    if (!json_is_object(root)) {
        http_reply_error(req, 400, "VALIDATION_ERROR", "Request body must be a JSON object");
        return false;
    }
    *body = root;
    return true;
}

const char *json_get_str(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int json_has(const json_t *obj, const char *key)
{
    return json_object_get(obj, key) != NULL;
}

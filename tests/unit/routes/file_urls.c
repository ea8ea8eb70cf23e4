/*
 * routes/file_urls.c: stored files as URLs in JSON text. rt/storage is replaced by stubs whose
 * URLs show what they were asked for; a reference is valid when it ends in ":good".
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/arena.h"
#include "routes/file_urls.h"
#include "rt/storage.h"

/* ---- rt/storage stubs ---- */

char *storage_ref_render(arena_t *a, const char *s, size_t n, int ttl_seconds)
{
    if (n < 13 || memcmp(s, "storage:", 8) != 0 || memcmp(s + n - 5, ":good", 5) != 0) return NULL;
    return arena_printf(a, "https://s/%.*s?ttl=%d", (int)(n - 13), s + 8, ttl_seconds);
}

char *storage_presign_get(arena_t *a, const char *key, const char *filename, const char *mime_type,
                          int ttl_seconds)
{
    if (strcmp(key, "nosign") == 0) return NULL;
    return arena_printf(a, "https://s/%s?f=%s&t=%s&ttl=%d", key, filename, mime_type, ttl_seconds);
}

/* ---- tests ---- */

static http_req_t req;

static const char *render(const char *json, int what)
{
    size_t n;
    const char *out = file_urls_render(&req, json, strlen(json), what, &n);
    assert_int_equal(n, strlen(out));
    return out;
}

static void nothing_to_render_is_the_text_itself(void **s)
{
    (void)s;
    const char *j = "{\"a\":\"b\",\"key\":\"storage\"}";
    assert_ptr_equal(render(j, FILE_URLS_REFS | FILE_URLS_KEYS), j);
    const char *forged = "{\"a\":\"storage:image/png:k:bad\"}";
    assert_ptr_equal(render(forged, FILE_URLS_REFS), forged);
}

static void references_are_values_only(void **s)
{
    (void)s;
    assert_string_equal(
        render("{\"a\" : \"storage:image/png:k:good\", \"b\":[\"storage:x:bad\","
               "\"storage:t/p:k2:good\"],\"c\":\"x \\\"storage:image/png:k:good\\\" y\","
               "\"storage:image/png:k:good\":1}",
               FILE_URLS_REFS),
        "{\"a\" : \"https://s/image/png:k?ttl=900\", \"b\":[\"storage:x:bad\","
        "\"https://s/t/p:k2?ttl=900\"],\"c\":\"x \\\"storage:image/png:k:good\\\" y\","
        "\"storage:image/png:k:good\":1}");
}

static void keys_become_urls_in_place(void **s)
{
    (void)s;
    const char *j = "{\"m\":{\"attachments\":[{\"id\":\"1\",\"filename\":\"a \\\"b\\\".txt\","
                    "\"mimeType\":\"text/plain\",\"sizeBytes\":3,\"_key\" : \"up/1/a.txt\"},"
                    "{\"filename\":null,\"mimeType\":null,\"_key\":null},"
                    "{\"filename\":\"n\",\"mimeType\":\"m\",\"_key\":\"nosign\"}],"
                    "\"sender\":{\"avatar\":\"storage:image/png:av:good\"}},\"_key\":\"top\"}";
    assert_string_equal(
        render(j, FILE_URLS_REFS | FILE_URLS_KEYS),
        "{\"m\":{\"attachments\":[{\"id\":\"1\",\"filename\":\"a \\\"b\\\".txt\","
        "\"mimeType\":\"text/plain\",\"sizeBytes\":3,"
        "\"url\" : \"https://s/up/1/a.txt?f=a \\\"b\\\".txt&t=text/plain&ttl=900\"},"
        "{\"filename\":null,\"mimeType\":null,\"url\":null},"
        "{\"filename\":\"n\",\"mimeType\":\"m\",\"url\":null}],"
        "\"sender\":{\"avatar\":\"https://s/image/png:av?ttl=900\"}},\"url\":null}");
    /* The body filter leaves "_key" alone: any answer may carry a client's JSON. */
    size_t n;
    const char *k = "{\"settings\":{\"filename\":\"f\",\"mimeType\":\"m\",\"_key\":\"x\"},"
                    "\"logo\":\"storage:image/png:l:good\"}";
    assert_string_equal(file_urls_body_filter(&req, k, strlen(k), &n),
                        "{\"settings\":{\"filename\":\"f\",\"mimeType\":\"m\",\"_key\":\"x\"},"
                        "\"logo\":\"https://s/image/png:l?ttl=900\"}");
}

/* Every prefix of a text (a cut answer) is walked without reading past its end. */
static void cut_texts_are_safe(void **s)
{
    (void)s;
    const char *j = "{\"a\":[{\"filename\":\"f\\\"\",\"mimeType\":\"m\",\"_key\":\"k\"},"
                    "\"storage:i/p:k:good\",{\"_key\":\"\"}]}";
    size_t len = strlen(j);
    for (size_t n = 0; n <= len; n++) {
        char *cut = arena_strndup(&req.arena, j, n);
        size_t out_len;
        const char *out = file_urls_render(&req, cut, n, FILE_URLS_REFS | FILE_URLS_KEYS, &out_len);
        assert_non_null(out);
    }
}

int main(void)
{
    arena_init(&req.arena);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nothing_to_render_is_the_text_itself),
        cmocka_unit_test(references_are_values_only),
        cmocka_unit_test(keys_become_urls_in_place),
        cmocka_unit_test(cut_texts_are_safe),
    };
    int rc = cmocka_run_group_tests_name("routes/file_urls", tests, NULL, NULL);
    arena_free(&req.arena);
    return rc;
}

/*
 * core/url.c: percent-decoding, query strings and Cookie headers, as the server applies them to
 * the request line and headers. Fields: [0] query string, [1] Cookie header, [2] a name looked
 * up in both, [3] text to percent-decode and to round-trip through url_encode.
 * Oracles: decoded strings never hold a NUL; decode(encode(s)) == s.
 */
#include <stdio.h>

#include "core/arena.h"
#include "core/url.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fields_t f;
    fuzz_split(&f, data, size, 4);
    arena_t a;
    arena_init(&a);

    const char *v = url_query_get(&a, f.s[0], f.s[2]);
    if (v) FUZZ_CHECK(strlen(v) <= f.len[0]);
    v = url_cookie_get(&a, f.s[1], f.s[2]);
    if (v) FUZZ_CHECK(strlen(v) <= f.len[1]);

    for (int plus = 0; plus < 2; plus++) {
        char *d = url_decode(&a, f.s[3], f.len[3], plus);
        if (d) FUZZ_CHECK(strlen(d) <= f.len[3]);
    }
    /* Round trip over the field up to its first NUL (what a C string can hold). */
    char *e = url_encode(&a, f.s[3]);
    FUZZ_CHECK(e != NULL);
    char *back = url_decode(&a, e, strlen(e), false);
    size_t n = strlen(f.s[3]);
    if (n) {
        FUZZ_CHECK(back != NULL);
        FUZZ_CHECK(strcmp(back, f.s[3]) == 0);
    }
    arena_free(&a);
    fuzz_fields_free(&f);
    return 0;
}

/*
 * The text rewrites every answer goes through: JSON compaction (core/json.h: json_space_at,
 * json_compact, buf_json_compact), the ASCII filename fallback (domain/text.h) and the size text
 * of 413 messages (http_size_text). Inputs are any bytes: bodies labelled JSON need not be JSON.
 * Oracles:
 * - compaction equals a byte-at-a-time model (a string runs from a quote to the next quote not
 *   escaped by a backslash; space, tab, CR and LF outside strings are dropped), in place and
 *   into a buffer alike; json_space_at is the first byte the model drops; compacting twice
 *   changes nothing;
 * - when jansson parses the input, it parses the compacted text to an equal value;
 * - the fallback is at most as long as the input, printable ASCII without '"' and '\\', one
 *   character per code point when the input is valid UTF-8;
 * - the size text fits its buffer and reads back as the same number of bytes.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>

#include "core/buf.h"
#include "core/http.h"
#include "core/json.h"
#include "domain/text.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The model: what compaction must write, one byte at a time. */
static size_t model_compact(char *dst, const char *s, size_t n, size_t *first_space)
{
    size_t o = 0;
    bool in = false, esc = false;
    *first_space = n;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in = false;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
            if (*first_space == n) *first_space = i;
            continue;
        } else if (c == '"') {
            in = true;
        }
        dst[o++] = c;
    }
    return o;
}

static void check_compact(const char *s, size_t n)
{
    char *want = malloc(n + 1), *got = malloc(n + 1), *again = malloc(n + 1);
    size_t first;
    size_t wn = model_compact(want, s, n, &first);

    FUZZ_CHECK(json_space_at(s, n) == first);
    size_t gn = json_compact(got, s, n);
    FUZZ_CHECK(gn == wn && memcmp(got, want, wn) == 0);
    FUZZ_CHECK(json_space_at(got, gn) == gn);
    FUZZ_CHECK(json_compact(again, got, gn) == gn && memcmp(again, got, gn) == 0);

    /* In place, as core/http.c's copy and the page cache use it. */
    memcpy(again, s, n);
    FUZZ_CHECK(json_compact(again, again, n) == wn && memcmp(again, want, wn) == 0);

    /* Appended to a buffer that holds text already (rt/events.c). */
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"data\":");
    buf_json_compact(&b, s, n);
    FUZZ_CHECK(b.len == 8 + wn && memcmp(b.data + 8, want, wn) == 0 && b.data[b.len] == '\0');
    buf_free(&b);

    json_error_t err;
    json_t *a = json_loadb(s, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    if (a) {
        json_t *c = json_loadb(got, gn, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        FUZZ_CHECK(c && json_equal(a, c));
        json_decref(c);
        json_decref(a);
    }
    free(want);
    free(got);
    free(again);
}

static void check_fallback(const char *s, size_t n)
{
    char *out = malloc(n + 1);
    size_t o = text_ascii_fallback(s, n, out);
    FUZZ_CHECK(o <= n && out[o] == '\0');
    for (size_t i = 0; i < o; i++) {
        unsigned char c = (unsigned char)out[i];
        FUZZ_CHECK(c >= 0x20 && c < 0x7f && c != '"' && c != '\\');
    }
    if (text_utf8_valid(s, n)) FUZZ_CHECK(o == text_cp_count(s, n));
    free(out);
}

static void check_size_text(const uint8_t *data, size_t size)
{
    uint64_t v = 0;
    memcpy(&v, data, size < sizeof(v) ? size : sizeof(v));
    char out[HTTP_SIZE_TEXT_MAX];
    http_size_text(v, out, sizeof(out));
    FUZZ_CHECK(strlen(out) < sizeof(out));
    unsigned long long num = 0;
    char unit[8] = "";
    FUZZ_CHECK(sscanf(out, "%llu %7s", &num, unit) == 2);
    uint64_t mul = strcmp(unit, "GiB") == 0   ? 1ULL << 30
                   : strcmp(unit, "MiB") == 0 ? 1ULL << 20
                   : strcmp(unit, "KiB") == 0 ? 1ULL << 10
                                              : 1;
    FUZZ_CHECK(mul > 1 || strcmp(unit, "bytes") == 0);
    FUZZ_CHECK((uint64_t)num * mul == v && (uint64_t)num == v / mul);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_compact((const char *)data, size);
    check_fallback((const char *)data, size);
    check_size_text(data, size);
    return 0;
}

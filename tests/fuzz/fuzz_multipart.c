/*
 * libFuzzer target for core/multipart. The first input byte seeds the piece sizes; the rest is
 * a body for boundary "XyZ". The body is parsed twice, whole and in pieces, and both runs must
 * give the same result code and the same events (a digest of every callback and byte), which
 * catches state carried wrongly across pieces as well as memory errors (ASan, UBSan).
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -I. core/multipart.c \
 *       tests/fuzz/fuzz_multipart.c -o fuzz_multipart   (scripts/fuzz builds it in build-fuzz)
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/multipart.h"

typedef struct digest {
    uint64_t h;
    size_t bytes;
} digest_t;

static void mix(digest_t *d, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++)
        d->h = (d->h ^ s[i]) * 1099511628211ULL;
    d->bytes += n;
}

static void mix_str(digest_t *d, const char *s)
{
    mix(d, s ? s : "\x01(null)", s ? strlen(s) + 1 : 7);
}

static int on_field(void *ud, const char *name, const char *value, size_t len)
{
    mix(ud, "F", 1);
    mix_str(ud, name);
    mix(ud, value, len);
    return 0;
}

static int on_file_begin(void *ud, const multipart_part_t *p)
{
    mix(ud, "B", 1);
    mix_str(ud, p->name);
    mix_str(ud, p->filename);
    mix_str(ud, p->content_type);
    return 0;
}

static int on_file_data(void *ud, const char *data, size_t len)
{
    mix(ud, data, len);
    return 0;
}

static int on_file_end(void *ud)
{
    mix(ud, "E", 1);
    return 0;
}

static const multipart_handler_t H = {on_field, on_file_begin, on_file_data, on_file_end};
static multipart_t m1, m2;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    unsigned seed = data[0];
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    digest_t a = {1469598103934665603ULL, 0}, b = {1469598103934665603ULL, 0};

    multipart_init(&m1, "multipart/form-data; boundary=XyZ", &H, &a);
    int rc1 = multipart_feed(&m1, body, n);
    if (rc1 == 0) rc1 = multipart_finish(&m1);

    multipart_init(&m2, "multipart/form-data; boundary=\"XyZ\"", &H, &b);
    int rc2 = 0;
    size_t off = 0;
    while (off < n && rc2 == 0) {
        size_t piece = 1 + (seed % 7);
        seed = seed * 1103515245u + 12345u;
        if (piece > n - off) piece = n - off;
        rc2 = multipart_feed(&m2, body + off, piece);
        off += piece;
    }
    if (rc2 == 0) rc2 = multipart_finish(&m2);

    if (rc1 != rc2 || a.h != b.h || a.bytes != b.bytes) abort();
    return 0;
}

/*
 * core/multipart.c: the streaming multipart/form-data parser of uploads. Fields: [0] the
 * Content-Type header, [1] the body. The first byte of the body field picks the piece size, so a
 * boundary split anywhere between reads is exercised. Oracles: fields never exceed
 * MULTIPART_FIELD_MAX; file bytes are only delivered between on_file_begin and on_file_end; the
 * result does not depend on how the body was cut (one piece vs. small pieces).
 */
#include <stdio.h>

#include "core/multipart.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct state {
    bool in_file;
    size_t fields, files, file_bytes, field_bytes;
} state_t;

static int on_field(void *ud, const char *name, const char *value, size_t len)
{
    (void)name;
    (void)value;
    state_t *s = ud;
    FUZZ_CHECK(!s->in_file && len <= MULTIPART_FIELD_MAX);
    s->fields++;
    s->field_bytes += len;
    return 0;
}

static int on_file_begin(void *ud, const multipart_part_t *part)
{
    state_t *s = ud;
    FUZZ_CHECK(!s->in_file && part->filename != NULL);
    FUZZ_CHECK(!strchr(part->filename, '/') && !strchr(part->filename, '\\'));
    s->in_file = true;
    s->files++;
    return 0;
}

static int on_file_data(void *ud, const char *d, size_t len)
{
    (void)d;
    state_t *s = ud;
    FUZZ_CHECK(s->in_file);
    s->file_bytes += len;
    return 0;
}

static int on_file_end(void *ud)
{
    state_t *s = ud;
    FUZZ_CHECK(s->in_file);
    s->in_file = false;
    return 0;
}

static const multipart_handler_t handler = {on_field, on_file_begin, on_file_data, on_file_end};

static multipart_t m; /* large: static, not on the stack */

static int run(const char *ct, const char *body, size_t n, size_t piece, state_t *s)
{
    memset(s, 0, sizeof(*s));
    if (multipart_init(&m, ct, &handler, s) != 0) return 1000;
    for (size_t off = 0; off < n; off += piece) {
        size_t k = n - off < piece ? n - off : piece;
        int rc = multipart_feed(&m, body + off, k);
        if (rc != 0) return rc;
    }
    return multipart_finish(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fields_t f;
    fuzz_split(&f, data, size, 2);
    if (f.len[1] == 0) {
        fuzz_fields_free(&f);
        return 0;
    }
    size_t piece = 1 + (unsigned char)f.s[1][0] % 17;
    state_t a, b;
    int ra = run(f.s[0], f.s[1] + 1, f.len[1] - 1, f.len[1], &a);
    int rb = run(f.s[0], f.s[1] + 1, f.len[1] - 1, piece, &b);
    FUZZ_CHECK(ra == rb);
    if (ra == 0)
        FUZZ_CHECK(a.fields == b.fields && a.files == b.files && a.file_bytes == b.file_bytes &&
                   a.field_bytes == b.field_bytes);
    fuzz_fields_free(&f);
    return 0;
}

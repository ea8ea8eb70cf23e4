/*
 * Shared helpers of the libFuzzer targets: an input is cut at NUL bytes into the string
 * arguments of the function under test, so the fuzzer mutates every argument independently
 * and the corpora stay readable.
 */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_FIELDS 16

typedef struct fuzz_fields {
    char *s[FUZZ_MAX_FIELDS]; /* NUL-terminated copies; missing fields are "" */
    size_t len[FUZZ_MAX_FIELDS];
    char *copy;
} fuzz_fields_t;

/* Splits data at NUL bytes into at most n fields (the last takes the rest, NULs included in
 * len). Free with fuzz_fields_free. */
static inline void fuzz_split(fuzz_fields_t *f, const uint8_t *data, size_t size, int n)
{
    f->copy = malloc(size + 1);
    if (size) memcpy(f->copy, data, size);
    f->copy[size] = '\0';
    char *p = f->copy, *end = f->copy + size;
    for (int i = 0; i < FUZZ_MAX_FIELDS; i++) {
        f->s[i] = end;
        f->len[i] = 0;
    }
    for (int i = 0; i < n && p <= end; i++) {
        char *z = i == n - 1 ? end : memchr(p, '\0', (size_t)(end - p));
        if (!z) z = end;
        f->s[i] = p;
        f->len[i] = (size_t)(z - p);
        p = z + 1;
    }
}

static inline void fuzz_fields_free(fuzz_fields_t *f)
{
    free(f->copy);
}

/* Stops the target when an oracle fails, so libFuzzer stores the input. */
#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FUZZ_CHECK failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__);         \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

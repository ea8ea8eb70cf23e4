/*
 * Overflow-checked size arithmetic. Every size computed from a number a client sent
 * (Content-Length, chunk sizes, body and buffer growth, counts times element sizes) goes through
 * these, so a huge value fails the check instead of wrapping to a small allocation.
 *
 * Each returns false (and leaves *out unspecified) when the exact result does not fit.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool size_add(size_t a, size_t b, size_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

static inline bool size_add3(size_t a, size_t b, size_t c, size_t *out)
{
    size_t t;
    return size_add(a, b, &t) && size_add(t, c, out);
}

static inline bool size_mul(size_t a, size_t b, size_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

/* A 64-bit count from the wire (Content-Length) as a size_t no larger than limit. */
static inline bool size_from_u64(uint64_t v, size_t limit, size_t *out)
{
    if (v > (uint64_t)limit) return false;
    *out = (size_t)v;
    return true;
}

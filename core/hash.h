#pragma once
/* FNV-1a (32 bits) over bytes taken as unsigned: the one hash of the in-memory tables (slots,
 * buckets, caches). Nothing persists its values or compares them across processes. */
#include <stddef.h>
#include <stdint.h>

#define FNV1A_INIT 2166136261u

static inline uint32_t fnv1a_n(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint32_t h = FNV1A_INIT;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* Of a NUL-terminated string, without counting it first. */
static inline uint32_t fnv1a(const char *s)
{
    uint32_t h = FNV1A_INIT;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

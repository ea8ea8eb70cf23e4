/* The wall clock in milliseconds since the epoch (CLOCK_REALTIME), for times compared with
 * the database's or other hosts' (session expiry, presence, scheduled sessions). Durations and
 * timeouts on the loop use its monotonic clock (uv_now, uv_hrtime) instead. */
#pragma once
#include <stdint.h>
#include <time.h>

static inline int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

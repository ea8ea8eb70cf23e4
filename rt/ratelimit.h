/*
 * Fixed-window counters in Redis, shared by every worker and host: the global per-IP limiter,
 * the stricter sign-in/sign-up/forget-password/invite-accept limiter (per IP and per email), and
 * per-email cooldowns. One EVAL per check.
 */
#pragma once
#include <stdbool.h>

/* allowed: false when over the limit; retry_after: seconds until the window resets;
 * error: Redis unavailable (the caller decides to fail open or closed). */
typedef void (*ratelimit_cb)(bool allowed, int retry_after, bool error, void *data);

/* Counts one hit on each key (key2 may be NULL) in a window of `window` seconds; allowed while
 * every count is <= points. When refused, retry_after is the time until every key over the limit
 * has reset. */
void ratelimit_hit(const char *key1, const char *key2, int points, int window, ratelimit_cb cb,
                   void *data);
/* over (when refused): which keys are over the limit, RATELIMIT_KEY1 | RATELIMIT_KEY2. */
#define RATELIMIT_KEY1 1
#define RATELIMIT_KEY2 2
typedef void (*ratelimit_keys_cb)(bool allowed, int retry_after, int over, bool error, void *data);
/* ratelimit_hit that also tells which keys are over the limit. */
void ratelimit_hit_keys(const char *key1, const char *key2, int points, int window,
                        ratelimit_keys_cb cb, void *data);
/* Cooldown: starts it when not running (allowed), else reports the seconds left. */
void ratelimit_cooldown(const char *key, int seconds, ratelimit_cb cb, void *data);
/* Limits on failures whose check runs concurrently (a password or a code checked on the thread
 * pool): count the attempt before the work with ratelimit_hit (so parallel attempts cannot all
 * pass before any failure is counted), then give it back once the attempt succeeded.
 * Fire and forget; never below zero; the window's expiry stays. */
void ratelimit_refund(const char *key);

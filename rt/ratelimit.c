/* Redis-backed limits (see ratelimit.h). */
#include "rt/ratelimit.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/mem.h"
#include "rt/redis.h"

/* INCR each key, give new keys their window; return the highest count, the seconds until every
 * key over ARGV[2] points resets (the longest TTL of those; of all keys when none is over) and
 * which keys are over (bit 0: the first, bit 1: the second). */
static const char HIT_SCRIPT[] =
    "local maxc, tover, tall, over = 0, 0, 0, 0 "
    "local points = tonumber(ARGV[2]) "
    "for i, k in ipairs(KEYS) do "
    "  local c = redis.call('INCR', k) "
    "  local t = redis.call('TTL', k) "
    "  if t < 0 then redis.call('EXPIRE', k, ARGV[1]); t = tonumber(ARGV[1]) end "
    "  if c > maxc then maxc = c end "
    "  if t > tall then tall = t end "
    "  if c > points then "
    "    over = over + (i == 1 and 1 or 2) "
    "    if t > tover then tover = t end "
    "  end "
    "end "
    "if over == 0 then tover = tall end "
    "return {maxc, tover, over}";

static const char COOLDOWN_SCRIPT[] =
    "if redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then return {1, 0} end "
    "local t = redis.call('TTL', KEYS[1]) "
    "if t < 1 then t = 1 end "
    "return {0, t}";

/* The count of a key without counting a hit, and its TTL. */
typedef struct pending {
    ratelimit_cb cb;
    ratelimit_keys_cb kcb; /* instead of cb: ratelimit_hit_keys */
    void *data;
    int points;
    bool cooldown;
} pending_t;

static void on_reply(redisReply *r, void *p)
{
    pending_t *pd = p;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 3 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER ||
        (r->elements == 3 && r->element[2]->type != REDIS_REPLY_INTEGER)) {
        if (pd->kcb)
            pd->kcb(false, 0, 0, true, pd->data);
        else
            pd->cb(false, 0, true, pd->data);
        free(pd);
        return;
    }
    long long a = r->element[0]->integer, t = r->element[1]->integer;
    int over = r->elements == 3 ? (int)r->element[2]->integer : 0;
    bool allowed = a <= pd->points;
    int retry = allowed ? 0 : (int)(t > 0 ? t : 1);
    if (pd->cooldown)
        pd->cb(a == 1, (int)t, false, pd->data);
    else if (pd->kcb)
        pd->kcb(allowed, retry, allowed ? 0 : over, false, pd->data);
    else
        pd->cb(allowed, retry, false, pd->data);
    free(pd);
}

static void hit(const char *key1, const char *key2, int points, int window, pending_t *pd)
{
    pd->points = points;
    char w[16], p[16];
    snprintf(w, sizeof(w), "%d", window);
    snprintf(p, sizeof(p), "%d", points);
    if (key2)
        redis_command(on_reply, pd, "EVAL %s 2 %s %s %s %s", HIT_SCRIPT, key1, key2, w, p);
    else
        redis_command(on_reply, pd, "EVAL %s 1 %s %s %s", HIT_SCRIPT, key1, w, p);
}

void ratelimit_hit(const char *key1, const char *key2, int points, int window, ratelimit_cb cb,
                   void *data)
{
    pending_t *pd = xcalloc(1, sizeof(*pd));
    pd->cb = cb;
    pd->data = data;
    hit(key1, key2, points, window, pd);
}

void ratelimit_hit_keys(const char *key1, const char *key2, int points, int window,
                        ratelimit_keys_cb cb, void *data)
{
    pending_t *pd = xcalloc(1, sizeof(*pd));
    pd->kcb = cb;
    pd->data = data;
    hit(key1, key2, points, window, pd);
}

void ratelimit_cooldown(const char *key, int seconds, ratelimit_cb cb, void *data)
{
    pending_t *pd = xcalloc(1, sizeof(*pd));
    pd->cb = cb;
    pd->data = data;
    pd->cooldown = true;
    char s[16];
    snprintf(s, sizeof(s), "%d", seconds);
    redis_command(on_reply, pd, "EVAL %s 1 %s %s", COOLDOWN_SCRIPT, key, s);
}

static const char REFUND_SCRIPT[] = "if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then "
                                    "return redis.call('DECR', KEYS[1]) end return 0";

void ratelimit_refund(const char *key)
{
    redis_command(NULL, NULL, "EVAL %s 1 %s", REFUND_SCRIPT, key);
}

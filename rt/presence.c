/* Presence in Redis (see presence.h). */
#include "rt/presence.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/clock.h"
#include "core/hash.h"
#include "core/http.h"
#include "core/mem.h"
#include "rt/redis.h"

#define CACHE_SLOTS 4096
#define THROTTLE_MS 15000
#define ONLINE_TTL 60
#define LASTSEEN_TTL (30 * 24 * 3600)

typedef struct slot {
    char user_id[32];
    uint64_t at_ms;
} slot_t;

static slot_t cache[CACHE_SLOTS];

void presence_heartbeat(const char *user_id)
{
    char now[24];
    snprintf(now, sizeof(now), "%lld", (long long)wall_ms());
    redis_command(NULL, NULL, "SET presence:%s %s EX %d", user_id, now, ONLINE_TTL);
    redis_command(NULL, NULL, "SET lastseen:%s %s EX %d", user_id, now, LASTSEEN_TTL);
}

void presence_touch(const char *user_id)
{
    if (strlen(user_id) >= sizeof(cache[0].user_id)) return;
    slot_t *s = &cache[fnv1a(user_id) % CACHE_SLOTS];
    uint64_t now = (uint64_t)wall_ms();
    if (strcmp(s->user_id, user_id) == 0 && now - s->at_ms < THROTTLE_MS) return;
    strcpy(s->user_id, user_id);
    s->at_ms = now;
    presence_heartbeat(user_id);
}

typedef struct get_state {
    presence_cb cb;
    void *data;
} get_state_t;

static void on_get(redisReply *r, void *p)
{
    get_state_t *g = p;
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) {
        g->cb(false, false, 0, g->data);
        free(g);
        return;
    }
    bool online = r->element[0]->type == REDIS_REPLY_STRING;
    int64_t last = 0;
    if (r->element[1]->type == REDIS_REPLY_STRING)
        last = strtoll(r->element[1]->str, NULL, 10);
    else if (online)
        last = strtoll(r->element[0]->str, NULL, 10);
    g->cb(true, online, last, g->data);
    free(g);
}

void presence_get(const char *user_id, presence_cb cb, void *data)
{
    get_state_t *g = xcalloc(1, sizeof(*g));
    g->cb = cb;
    g->data = data;
    redis_command(on_get, g, "MGET presence:%s lastseen:%s", user_id, user_id);
}

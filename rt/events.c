/* Event publishing (see events.h). */
#include "rt/events.h"

#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/mem.h"
#include "rt/redis.h"

/* KEYS: the channels' streams (EVENTS_KEY_PREFIX + channel). ARGV: entries kept at least, the
 * history window in ms, the key TTL in seconds, the message without its id (from its first
 * field on: `"event":...,"data":...}`). Each stream's id goes into the message published on its
 * channel, so a live event and its replay carry the same id.
 * Trimming cuts at an id (MINID, exact): the window before the newest entry, or, once more than
 * 100 entries beyond the count are kept, the count (so the entries beyond it are read only
 * every 100 events). When it removed anything the cut becomes the stream's
 * max-deleted-entry-id: every entry after it is still there, which is what a replay checks. */
static const char PUBLISH_SCRIPT[] =
    "local function split(id) "
    "  local a, b = string.match(id, '^(%d+)-(%d+)$') "
    "  return tonumber(a), tonumber(b) "
    "end "
    "local tail, keep = ARGV[4], tonumber(ARGV[1]) "
    "for _, k in ipairs(KEYS) do "
    "  local id = redis.call('XADD', k, '*', 'm', tail) "
    "  local ms = split(id) "
    "  local cut = string.format('%.0f', ms - tonumber(ARGV[2])) .. '-0' "
    "  local len = redis.call('XLEN', k) "
    "  if len > keep + 100 then "
    "    local old = redis.call('XRANGE', k, '-', '+', 'COUNT', len - keep + 1) "
    "    local c2 = old[#old][1] "
    "    local cm, cs = split(cut) "
    "    local om, os = split(c2) "
    "    if om > cm or (om == cm and os > cs) then cut = c2 end "
    "  end "
    "  if redis.call('XTRIM', k, 'MINID', cut) > 0 then "
    "    redis.call('XSETID', k, id, 'MAXDELETEDID', cut) "
    "  end "
    "  redis.call('EXPIRE', k, ARGV[3]) "
    "  redis.call('PUBLISH', string.sub(k, " EVENTS_PREFIX_LEN_STR " + 1), "
    "             '{\"id\":\"' .. id .. '\",' .. tail) "
    "end "
    "return #KEYS";

static bool listed_before(const char *const *ids, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (ids[j] && strcmp(ids[j], ids[i]) == 0) return true;
    return false;
}

void events_publish_to(const char *organization_id, const char *mentorship_id,
                       const char *const *user_ids, size_t n, const char *event,
                       const char *data_json)
{
    buf_t tail = BUF_INIT;
    buf_puts(&tail, "\"event\":");
    buf_json_str(&tail, event);
    /* Before "data", which must stay last (rt/streams.c reads it to the closing brace). */
    if (organization_id) {
        buf_puts(&tail, ",\"organizationId\":");
        buf_json_str(&tail, organization_id);
    }
    buf_puts(&tail, ",\"data\":");
    buf_puts(&tail, data_json);
    buf_putc(&tail, '}');

    /* EVAL, script, numkeys, keys..., 4 arguments. */
    size_t cap = n + 1 + 7;
    const char **argv = xcalloc(cap, sizeof(*argv));
    size_t *lens = xcalloc(cap, sizeof(*lens));
    char(*keys)[128] = xcalloc(n + 1, sizeof(*keys));
    int nkeys = 0;
    if (mentorship_id)
        snprintf(keys[nkeys++], sizeof(keys[0]), EVENTS_KEY_PREFIX "mentorship:%s", mentorship_id);
    for (size_t i = 0; i < n; i++) {
        if (!user_ids[i] || !user_ids[i][0] || listed_before(user_ids, i)) continue;
        snprintf(keys[nkeys++], sizeof(keys[0]), EVENTS_KEY_PREFIX "user:%s", user_ids[i]);
    }
    if (nkeys > 0) {
        char numkeys[16], maxlen[16], window[24], ttl[16];
        snprintf(numkeys, sizeof(numkeys), "%d", nkeys);
        snprintf(maxlen, sizeof(maxlen), "%d", cfg.event_history_max);
        snprintf(window, sizeof(window), "%lld", (long long)cfg.event_history_seconds * 1000);
        snprintf(ttl, sizeof(ttl), "%d", EVENTS_KEY_TTL_SECONDS);
        int argc = 0;
        argv[argc++] = "EVAL";
        argv[argc++] = PUBLISH_SCRIPT;
        argv[argc++] = numkeys;
        for (int i = 0; i < nkeys; i++)
            argv[argc++] = keys[i];
        argv[argc++] = maxlen;
        argv[argc++] = window;
        argv[argc++] = ttl;
        argv[argc] = tail.data;
        lens[argc++] = tail.len;
        for (int i = 0; i < argc - 1; i++)
            lens[i] = strlen(argv[i]);
        /* At least once, like PUBLISH: a script in flight when the connection died runs again
         * after the reconnect (the event may then be stored twice, under two ids). */
        redis_command_retry(argc, argv, lens, 3);
    }
    free(keys);
    free(lens);
    free(argv);
    buf_free(&tail);
}

/* The coach's and teacher's user channels are just two user ids: one encoder and one publish
 * path for every event (NULL and repeated ids are skipped there). */
void events_publish(const char *organization_id, const char *mentorship_id, const char *coach_id,
                    const char *teacher_id, const char *event, const char *data_json, bool to_users)
{
    const char *users[2] = {coach_id, teacher_id};
    events_publish_to(organization_id, mentorship_id, users, to_users ? 2 : 0, event, data_json);
}

void events_control(const char *user_id, const char *json)
{
    char chan[96];
    snprintf(chan, sizeof(chan), "user:%s:control", user_id);
    redis_publish(chan, json, strlen(json));
}

void events_sessions_ended(const char *user_id, const char *keep_session_id)
{
    char msg[128];
    if (keep_session_id)
        snprintf(msg, sizeof(msg), "{\"type\":\"sessions-ended\",\"keepSessionId\":\"%s\"}",
                 keep_session_id);
    else
        snprintf(msg, sizeof(msg), "{\"type\":\"sessions-ended\"}");
    events_control(user_id, msg);
}

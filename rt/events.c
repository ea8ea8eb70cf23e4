/* Event publishing (see events.h). */
#include "rt/events.h"

#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/checked.h"
#include "core/config.h"
#include "core/mem.h"
#include "rt/redis.h"

/* KEYS: the channels' streams (EVENTS_KEY_PREFIX + channel). ARGV: entries kept at least, the
 * history window in ms, the key TTL in seconds, then two per event, in publishing order: the
 * numbers of its streams among KEYS ("1 3 4") and the message without its id (from its first
 * field on: `"event":...,"data":...}`). Each stream's id goes into the message published on its
 * channel, so a live event and its replay carry the same id.
 * Trimming runs once per stream after all of the call's events are added: the script is atomic,
 * so nobody sees the stream between them, and the state is the one trimming after each event
 * would leave, within the same bounds. It cuts at an id (MINID, exact): the window before the
 * newest entry, or, once more than 100 entries beyond the count are kept, the count (so the
 * entries beyond it are read only every 100 events). When it removed anything the cut becomes
 * the stream's max-deleted-entry-id: every entry after it is still there, which is what a replay
 * checks. */
static const char PUBLISH_SCRIPT[] =
    "local function split(id) "
    "  local a, b = string.match(id, '^(%d+)-(%d+)$') "
    "  return tonumber(a), tonumber(b) "
    "end "
    "local keep, newest = tonumber(ARGV[1]), {} "
    "for e = 4, #ARGV - 1, 2 do "
    "  local tail = ARGV[e + 1] "
    "  for n in string.gmatch(ARGV[e], '%d+') do "
    "    local k = KEYS[tonumber(n)] "
    "    local id = redis.call('XADD', k, '*', 'm', tail) "
    "    newest[k] = id "
    "    redis.call('PUBLISH', string.sub(k, " EVENTS_PREFIX_LEN_STR " + 1), "
    "               '{\"id\":\"' .. id .. '\",' .. tail) "
    "  end "
    "end "
    "for _, k in ipairs(KEYS) do "
    "  local id = newest[k] "
    "  if id then "
    "    local ms = split(id) "
    "    local cut = string.format('%.0f', ms - tonumber(ARGV[2])) .. '-0' "
    "    local len = redis.call('XLEN', k) "
    "    if len > keep + 100 then "
    "      local old = redis.call('XRANGE', k, '-', '+', 'COUNT', len - keep + 1) "
    "      local c2 = old[#old][1] "
    "      local cm, cs = split(cut) "
    "      local om, os = split(c2) "
    "      if om > cm or (om == cm and os > cs) then cut = c2 end "
    "    end "
    "    if redis.call('XTRIM', k, 'MINID', cut) > 0 then "
    "      redis.call('XSETID', k, id, 'MAXDELETEDID', cut) "
    "    end "
    "    redis.call('EXPIRE', k, ARGV[3]) "
    "  end "
    "end "
    "return #KEYS";

/* Events waiting for one script call: every event of a batch (events_batch_begin), or the one
 * being published. keys[] are the streams named so far, each once; per event its tail (the
 * message without the id) and the numbers of its streams. */
typedef struct pending_event {
    buf_t streams; /* "1 3 4": 1-based positions in keys[] */
    buf_t tail;
} pending_event_t;

static struct {
    bool batch;
    char (*keys)[128];
    size_t nkeys, capkeys;
    pending_event_t *events;
    size_t nevents, capevents;
} pend;

/* Room for more elements in a growing array: the capacity doubles, from 8. */
static void *grow(void *p, size_t *cap, size_t elem)
{
    size_t n = *cap ? *cap * 2 : 8, bytes;
    if (n < *cap || !size_mul(n, elem, &bytes)) xoverflow("events: pending events");
    *cap = n;
    return xrealloc(p, bytes);
}

/* The 1-based number of a stream among the pending keys, added when new. */
static size_t key_number(const char *key)
{
    for (size_t i = 0; i < pend.nkeys; i++)
        if (strcmp(pend.keys[i], key) == 0) return i + 1;
    if (pend.nkeys == pend.capkeys) pend.keys = grow(pend.keys, &pend.capkeys, sizeof(*pend.keys));
    snprintf(pend.keys[pend.nkeys], sizeof(pend.keys[0]), "%s", key);
    return ++pend.nkeys;
}

/* One EVAL for every pending event, then nothing is pending. */
static void pending_send(void)
{
    if (pend.nevents == 0) return;
    /* EVAL, script, numkeys, keys..., 3 arguments, 2 per event. */
    size_t cap = 3 + pend.nkeys + 3 + 2 * pend.nevents;
    const char **argv = xcalloc(cap, sizeof(*argv));
    size_t *lens = xcalloc(cap, sizeof(*lens));
    char numkeys[24], maxlen[16], window[24], ttl[16];
    snprintf(numkeys, sizeof(numkeys), "%zu", pend.nkeys);
    snprintf(maxlen, sizeof(maxlen), "%d", cfg.event_history_max);
    snprintf(window, sizeof(window), "%lld", (long long)cfg.event_history_seconds * 1000);
    snprintf(ttl, sizeof(ttl), "%d", EVENTS_KEY_TTL_SECONDS);
    size_t argc = 0;
    argv[argc++] = "EVAL";
    argv[argc++] = PUBLISH_SCRIPT;
    argv[argc++] = numkeys;
    for (size_t i = 0; i < pend.nkeys; i++)
        argv[argc++] = pend.keys[i];
    argv[argc++] = maxlen;
    argv[argc++] = window;
    argv[argc++] = ttl;
    for (size_t i = 0; i < argc; i++)
        lens[i] = strlen(argv[i]);
    for (size_t e = 0; e < pend.nevents; e++) {
        argv[argc] = pend.events[e].streams.data;
        lens[argc++] = pend.events[e].streams.len;
        argv[argc] = pend.events[e].tail.data;
        lens[argc++] = pend.events[e].tail.len;
    }
    /* At least once, like PUBLISH: a script in flight when the connection died runs again
     * after the reconnect (its events may then be stored twice, under two ids). */
    redis_command_retry((int)argc, argv, lens, 3);
    for (size_t e = 0; e < pend.nevents; e++) {
        buf_free(&pend.events[e].streams);
        buf_free(&pend.events[e].tail);
    }
    pend.nevents = 0;
    pend.nkeys = 0;
    free(lens);
    free(argv);
}

void events_batch_begin(void)
{
    pend.batch = true;
}

void events_batch_end(void)
{
    pend.batch = false;
    pending_send();
}

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
    pending_event_t ev = {BUF_INIT, BUF_INIT};
    char key[128];
    if (mentorship_id) {
        snprintf(key, sizeof(key), EVENTS_KEY_PREFIX "mentorship:%s", mentorship_id);
        buf_printf(&ev.streams, "%zu", key_number(key));
    }
    for (size_t i = 0; i < n; i++) {
        if (!user_ids[i] || !user_ids[i][0] || listed_before(user_ids, i)) continue;
        snprintf(key, sizeof(key), EVENTS_KEY_PREFIX "user:%s", user_ids[i]);
        buf_printf(&ev.streams, ev.streams.len ? " %zu" : "%zu", key_number(key));
    }
    if (ev.streams.len == 0) {
        buf_free(&ev.streams);
        return;
    }
    buf_puts(&ev.tail, "\"event\":");
    buf_json_str(&ev.tail, event);
    /* Before "data", which must stay last (rt/streams.c reads it to the closing brace). */
    if (organization_id) {
        buf_puts(&ev.tail, ",\"organizationId\":");
        buf_json_str(&ev.tail, organization_id);
    }
    buf_puts(&ev.tail, ",\"data\":");
    buf_puts(&ev.tail, data_json);
    buf_putc(&ev.tail, '}');
    if (pend.nevents == pend.capevents)
        pend.events = grow(pend.events, &pend.capevents, sizeof(*pend.events));
    pend.events[pend.nevents++] = ev;
    if (!pend.batch) pending_send();
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

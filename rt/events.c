/* Event publishing (see events.h). */
#include "rt/events.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/buf.h"
#include "core/checked.h"
#include "core/config.h"
#include "core/hash.h"
#include "core/json.h"
#include "core/mem.h"
#include "rt/redis.h"

/* KEYS: the channels' streams (EVENTS_KEY_PREFIX + channel). ARGV: entries kept at least, the
 * history window in ms, the key TTL in seconds, then two per event, in publishing order: the
 * numbers of its streams among KEYS ("1 3 4") and the message without its id (from its first
 * field on: `"event":...,"data":...}`). Each stream's id goes into the message published on its
 * channel, so a live event and its replay carry the same id. An event takes the id of its first
 * stream on the others too, so it has one id everywhere, unless a stream already holds a newer
 * entry (another event in the same millisecond): that stream gives it its next id. Time runs on
 * while a script does (Redis 7.0), and the ids that XADD chose for each stream differed whenever
 * a millisecond ended between two of them.
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
    "  local tail, first = ARGV[e + 1], nil "
    "  for n in string.gmatch(ARGV[e], '%d+') do "
    "    local k = KEYS[tonumber(n)] "
    "    local id "
    "    if first then "
    "      id = redis.pcall('XADD', k, first, 'm', tail) "
    "      if type(id) == 'table' then id = redis.call('XADD', k, '*', 'm', tail) end "
    "    else "
    "      id = redis.call('XADD', k, '*', 'm', tail) "
    "      first = id "
    "    end "
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
 * being published. keys[] are the streams named so far, each once, found through a hash index
 * (an event may name thousands: every administrator of a large organization). Per event: its
 * tail (the message without the id) and the numbers of its streams. */
typedef struct pending_key {
    char name[128];
    size_t named; /* the number (1-based) of the last event that named it: once per event */
} pending_key_t;

typedef struct pending_event {
    buf_t streams; /* "1 3 4": 1-based positions in keys[] */
    buf_t tail;
} pending_event_t;

static struct {
    bool batch;
    pending_key_t *keys;
    size_t nkeys, capkeys;
    uint32_t *slots; /* open addressing: 0 empty, else a position in keys[] + 1 */
    size_t nslots;   /* a power of two, more than twice nkeys */
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

static size_t key_slot(const char *key)
{
    return fnv1a(key) & (pend.nslots - 1);
}

/* A larger index: twice the slots, every key placed again. */
static void slots_grow(void)
{
    size_t n = pend.nslots ? pend.nslots * 2 : 64;
    if (n < pend.nslots) xoverflow("events: stream index");
    free(pend.slots);
    pend.slots = xcalloc(n, sizeof(*pend.slots));
    pend.nslots = n;
    for (size_t k = 0; k < pend.nkeys; k++) {
        size_t i = key_slot(pend.keys[k].name);
        while (pend.slots[i])
            i = (i + 1) & (n - 1);
        pend.slots[i] = (uint32_t)(k + 1);
    }
}

/* The 1-based number of a stream among the pending keys, added when new. */
static size_t key_number(const char *key)
{
    if (2 * (pend.nkeys + 1) >= pend.nslots) slots_grow();
    size_t i = key_slot(key);
    for (; pend.slots[i]; i = (i + 1) & (pend.nslots - 1))
        if (strcmp(pend.keys[pend.slots[i] - 1].name, key) == 0) return pend.slots[i];
    if (pend.nkeys == pend.capkeys) pend.keys = grow(pend.keys, &pend.capkeys, sizeof(*pend.keys));
    snprintf(pend.keys[pend.nkeys].name, sizeof(pend.keys[0].name), "%s", key);
    pend.keys[pend.nkeys].named = 0;
    pend.slots[i] = (uint32_t)(pend.nkeys + 1);
    return ++pend.nkeys;
}

/* Adds a stream to the event being built (the pend.nevents + 1st), once. */
static void event_names(pending_event_t *ev, const char *key)
{
    size_t k = key_number(key);
    if (pend.keys[k - 1].named == pend.nevents + 1) return;
    pend.keys[k - 1].named = pend.nevents + 1;
    buf_printf(&ev->streams, ev->streams.len ? " %zu" : "%zu", k);
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
        argv[argc++] = pend.keys[i].name;
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
    memset(pend.slots, 0, pend.nslots * sizeof(*pend.slots));
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

void events_publish_to(const char *organization_id, const char *mentorship_id,
                       const char *const *user_ids, size_t n, const char *event,
                       const char *data_json)
{
    pending_event_t ev = {BUF_INIT, BUF_INIT};
    char key[128];
    if (mentorship_id) {
        snprintf(key, sizeof(key), EVENTS_KEY_PREFIX "mentorship:%s", mentorship_id);
        event_names(&ev, key);
    }
    for (size_t i = 0; i < n; i++) {
        if (!user_ids[i] || !user_ids[i][0]) continue;
        snprintf(key, sizeof(key), EVENTS_KEY_PREFIX "user:%s", user_ids[i]);
        event_names(&ev, key);
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
    buf_json_compact(&ev.tail, data_json, strlen(data_json));
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
    snprintf(chan, sizeof(chan), EVENTS_CONTROL_CHANNEL_FMT, user_id);
    redis_publish(chan, json, strlen(json));
}

void events_sessions_ended(const char *user_id, const char *keep_session_id)
{
    char msg[128];
    if (keep_session_id)
        snprintf(msg, sizeof(msg), "{\"type\":\"sessions-ended\",\"keepSessionId\":\"%s\"}",
                 keep_session_id);
    else
        snprintf(msg, sizeof(msg), "%s", EVENTS_SESSIONS_ENDED_ALL);
    events_control(user_id, msg);
}

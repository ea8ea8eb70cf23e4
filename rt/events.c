/* Event publishing (see events.h). */
#include "rt/events.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "rt/redis.h"

void events_make_id(char out[48])
{
    static unsigned long seq;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    unsigned long long ms =
        (unsigned long long)ts.tv_sec * 1000 + (unsigned long long)ts.tv_nsec / 1000000;
    snprintf(out, 48, "%llu-%x-%lu", ms, (unsigned)getpid(), ++seq);
}

void events_publish_to(const char *organization_id, const char *mentorship_id,
                       const char *const *user_ids, size_t n, const char *event,
                       const char *data_json)
{
    char id[48];
    events_make_id(id);
    buf_t msg = BUF_INIT;
    buf_puts(&msg, "{\"id\":");
    buf_json_str(&msg, id);
    buf_puts(&msg, ",\"event\":");
    buf_json_str(&msg, event);
    /* Before "data", which must stay last (rt/streams.c reads it to the closing brace). */
    if (organization_id) {
        buf_puts(&msg, ",\"organizationId\":");
        buf_json_str(&msg, organization_id);
    }
    buf_puts(&msg, ",\"data\":");
    buf_puts(&msg, data_json);
    buf_putc(&msg, '}');
    char chan[96];
    if (mentorship_id) {
        snprintf(chan, sizeof(chan), "mentorship:%s", mentorship_id);
        redis_publish(chan, msg.data, msg.len);
    }
    for (size_t i = 0; i < n; i++) {
        if (!user_ids[i] || !user_ids[i][0]) continue;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = user_ids[j] && strcmp(user_ids[j], user_ids[i]) == 0;
        if (seen) continue;
        snprintf(chan, sizeof(chan), "user:%s", user_ids[i]);
        redis_publish(chan, msg.data, msg.len);
    }
    buf_free(&msg);
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

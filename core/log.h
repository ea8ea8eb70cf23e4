/* Logging to stderr, one line per record, filtered by LOG_LEVEL. */
#pragma once
#include <stdbool.h>

enum log_level { LOG_ERROR = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_DEBUG = 3 };

extern int log_level_current;
extern bool log_json; /* LOG_FORMAT=json: one JSON object per line */

void log_set_level(int level);
int log_level_parse(const char *s); /* -1 when unknown */
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_WARN, __VA_ARGS__)
#define log_info(...)                                                                              \
    do {                                                                                           \
        if (log_level_current >= LOG_INFO) log_msg(LOG_INFO, __VA_ARGS__);                         \
    } while (0)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_level_current >= LOG_DEBUG) log_msg(LOG_DEBUG, __VA_ARGS__);                       \
    } while (0)
void log_set_json(bool on);
/* getpid(), read once per process (a forked child reads its own): it is in every record and in
 * every request id, and glibc no longer caches it. */
int log_pid(void);
/* The access record of one answered request (JSON mode): time, level, pid, requestId, method,
 * route pattern (NULL: unmatched), status, durationMs, userId (NULL: none), client (its
 * address: the peer's, or behind a trusted proxy the X-Forwarded-For client). */
/* The access record of one answered request in text mode: a log_info line that is batched like
 * log_access's. */
void log_access_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* While on (a server loop runs), access records are gathered and written at log_flush, which
 * the loop calls at the end of each turn; other records write what is gathered first. Turning
 * it off flushes. */
void log_set_batching(bool on);
void log_flush(void);
void log_access(const char *request_id, const char *method, const char *route, int status,
                double ms, const char *user_id, const char *client);

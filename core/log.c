/* One line per record on stderr: time, pid, level, message. */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_level_current = LOG_INFO;
bool log_json;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(int level)
{
    log_level_current = level;
}

int log_level_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, level_names[i]) == 0) return i;
    if (strcasecmp(s, "warning") == 0) return LOG_WARN;
    return -1;
}

void log_set_json(bool on)
{
    log_json = on;
}

static int pid_cached;

static void pid_forget(void)
{
    pid_cached = 0;
}

int log_pid(void)
{
    if (pid_cached == 0) {
        static bool registered;
        if (!registered) {
            registered = true;
            pthread_atfork(NULL, NULL, pid_forget);
        }
        pid_cached = (int)getpid();
    }
    return pid_cached;
}

/* Access records, batched: while a server loop runs (log_set_batching), the records of one loop
 * turn are gathered here and written together when the turn ends (log_flush), in writes of at
 * most PIPE_BUF bytes of whole lines, so lines of several workers on one pipe never mix. Any
 * other record flushes them first (records keep their order), and so does exit(). */
#define BATCH_MAX 4096
static char batch[BATCH_MAX];
static size_t batch_len;
static bool batching;
static pthread_mutex_t batch_lock = PTHREAD_MUTEX_INITIALIZER;

static void write_all(const char *p, size_t n)
{
    ssize_t w = write(STDERR_FILENO, p, n);
    (void)w;
}

static void flush_locked(void)
{
    if (batch_len) write_all(batch, batch_len);
    batch_len = 0;
}

void log_flush(void)
{
    pthread_mutex_lock(&batch_lock);
    flush_locked();
    pthread_mutex_unlock(&batch_lock);
}

void log_set_batching(bool on)
{
    static bool registered;
    if (on && !registered) {
        registered = true;
        atexit(log_flush);
    }
    pthread_mutex_lock(&batch_lock);
    flush_locked();
    batching = on;
    pthread_mutex_unlock(&batch_lock);
}

/* One whole line: into the batch (an access record while batching), else written now after
 * what the batch holds. A single write keeps lines from different workers whole. */
static void emit(const char *line, size_t len, bool access)
{
    pthread_mutex_lock(&batch_lock);
    if (access && batching && len <= BATCH_MAX) {
        if (batch_len + len > BATCH_MAX) flush_locked();
        memcpy(batch + batch_len, line, len);
        batch_len += len;
    } else {
        flush_locked();
        write_all(line, len);
    }
    pthread_mutex_unlock(&batch_lock);
}

typedef struct jline {
    char data[4096];
    size_t len;
} jline_t;

static void jraw(jline_t *j, const char *s)
{
    size_t n = strlen(s);
    if (n > sizeof(j->data) - 2 - j->len) n = sizeof(j->data) - 2 - j->len;
    memcpy(j->data + j->len, s, n);
    j->len += n;
}

/* A JSON string; control characters, quotes and backslashes escaped (bytes >= 0x80 pass as
 * they are: log values are UTF-8 or ASCII). Truncates rather than overflow the line. */
static void jstr(jline_t *j, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (j->len + 2 >= sizeof(j->data) - 2) return;
    j->data[j->len++] = '"';
    for (; *s && j->len < sizeof(j->data) - 10; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') {
            j->data[j->len++] = '\\';
            j->data[j->len++] = (char)ch;
        } else if (ch < 0x20 || ch == 0x7f) {
            memcpy(j->data + j->len, "\\u00", 4);
            j->len += 4;
            j->data[j->len++] = hex[ch >> 4];
            j->data[j->len++] = hex[ch & 15];
        } else {
            j->data[j->len++] = (char)ch;
        }
    }
    j->data[j->len++] = '"';
}

static void jhead(jline_t *j, int level)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    j->len = (size_t)snprintf(j->data, sizeof(j->data),
                              "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\",\"level\":\"%s\","
                              "\"pid\":%d",
                              tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                              tm.tm_sec, (int)(tv.tv_usec / 1000), level_names[level], log_pid());
}

static void jend(jline_t *j, bool access)
{
    j->data[j->len++] = '}';
    j->data[j->len++] = '\n';
    emit(j->data, j->len, access);
}

void log_access(const char *request_id, const char *method, const char *route, int status,
                double ms, const char *user_id, const char *client)
{
    jline_t j;
    jhead(&j, LOG_INFO);
    jraw(&j, ",\"msg\":\"request\",\"requestId\":");
    jstr(&j, request_id ? request_id : "");
    jraw(&j, ",\"method\":");
    jstr(&j, method ? method : "-");
    jraw(&j, ",\"route\":");
    if (route)
        jstr(&j, route);
    else
        jraw(&j, "null");
    char num[64];
    snprintf(num, sizeof(num), ",\"status\":%d,\"durationMs\":%.3f,\"userId\":", status, ms);
    jraw(&j, num);
    if (user_id)
        jstr(&j, user_id);
    else
        jraw(&j, "null");
    jraw(&j, ",\"client\":");
    jstr(&j, client ? client : "");
    jend(&j, true);
}

static void vlog(int level, bool access, const char *fmt, va_list ap)
{
    if (level > log_level_current) return;
    if (log_json) {
        char msg[2048];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        jline_t j;
        jhead(&j, level);
        jraw(&j, ",\"msg\":");
        jstr(&j, msg);
        jend(&j, access);
        return;
    }
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%d] %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), log_pid(), level_names[level]);
    char msg[2048];
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t mlen = m < 0 ? 0 : (size_t)m;
    if (mlen > sizeof(msg) - 1) mlen = sizeof(msg) - 1;
    /* Control characters (CR, LF, ESC, ...) from any logged string are escaped as \xNN: a
     * client-supplied value can never start a forged line or drive a terminal. */
    size_t len = (size_t)n;
    for (size_t i = 0; i < mlen && len < sizeof(line) - 5; i++) {
        unsigned char ch = (unsigned char)msg[i];
        if (ch < 0x20 || ch == 0x7f) {
            static const char hex[] = "0123456789abcdef";
            line[len++] = '\\';
            line[len++] = 'x';
            line[len++] = hex[ch >> 4];
            line[len++] = hex[ch & 15];
        } else {
            line[len++] = (char)ch;
        }
    }
    line[len++] = '\n';
    emit(line, len, access);
}

void log_msg(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(level, false, fmt, ap);
    va_end(ap);
}

void log_access_text(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(LOG_INFO, true, fmt, ap);
    va_end(ap);
}

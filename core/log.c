/* One line per record on stderr: time, pid, level, message. */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int log_level_current = LOG_INFO;

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

void log_msg(int level, const char *fmt, ...)
{
    if (level > log_level_current) return;
    char line[2048];
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ [%d] %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), (int)getpid(), level_names[level]);
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
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
    /* A single write keeps lines from different workers whole. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

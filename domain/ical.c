/* iCalendar writer (see ical.h). */
#include "domain/ical.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "domain/err.h"

void ical_utc(int64_t ms, char out[17])
{
    time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
    struct tm tm;
    gmtime_r(&t, &tm);
    /* Each field is range-limited so the text is always 16 characters. */
    snprintf(out, 17, "%04u%02u%02uT%02u%02u%02uZ", (unsigned)(tm.tm_year + 1900) % 10000u,
             (unsigned)(tm.tm_mon + 1) % 100u, (unsigned)tm.tm_mday % 100u,
             (unsigned)tm.tm_hour % 100u, (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u);
}

/* Bytes a TEXT value cannot hold as they are: the escaped `\`, `;`, `,`, line breaks and the
 * control characters other than HTAB. */
static bool text_special(unsigned char ch)
{
    return ch == '\\' || ch == ';' || ch == ',' || (ch < 0x20 && ch != '\t') || ch == 0x7f;
}

void ical_escape_text(growbuf_t *b, const char *s)
{
    const char *p = s;
    while (*p) {
        /* The plain bytes up to the next special one go in one piece. */
        const char *run = p;
        while (*p && !text_special((unsigned char)*p))
            p++;
        if (p > run) growbuf_put(b, run, (size_t)(p - run));
        if (!*p) break;
        unsigned char ch = (unsigned char)*p;
        if (ch == '\\' || ch == ';' || ch == ',') {
            char e[2] = {'\\', (char)ch};
            growbuf_put(b, e, 2);
        } else if (ch == '\r' || ch == '\n') {
            if (ch == '\r' && p[1] == '\n') p++; /* CRLF is one line break */
            growbuf_puts(b, "\\n");
        } /* other control characters are dropped */
        p++;
    }
}

/* Appends text (already escaped) folded: every physical line at most ICAL_LINE_OCTETS octets
 * before its CRLF, a continuation starting with a space, never inside a UTF-8 sequence. */
static void fold(growbuf_t *b, const char *s, size_t n)
{
    size_t i = 0, room = ICAL_LINE_OCTETS;
    while (n - i > room) {
        /* The longest piece that fits and ends before a code point's first byte. */
        size_t cut = i + room;
        while (cut > i && ((unsigned char)s[cut] & 0xC0) == 0x80)
            cut--;
        if (cut == i) cut = i + room; /* not UTF-8: no boundary to keep */
        growbuf_put(b, s + i, cut - i);
        growbuf_put(b, "\r\n ", 3);
        i = cut;
        room = ICAL_LINE_OCTETS - 1; /* the leading space counts */
    }
    growbuf_put(b, s + i, n - i);
    growbuf_put(b, "\r\n", 2);
}

void ical_line(growbuf_t *b, const char *name, const char *value, bool escape)
{
    growbuf_t line = GROWBUF_INIT;
    growbuf_puts(&line, name);
    growbuf_put(&line, ":", 1);
    const char *p = value ? value : "";
    if (escape) {
        ical_escape_text(&line, p);
    } else {
        /* As is, but without control characters, in runs. */
        while (*p) {
            const char *run = p;
            while ((unsigned char)*p >= 0x20 && *p != 0x7f)
                p++;
            if (p > run) growbuf_put(&line, run, (size_t)(p - run));
            if (*p) p++;
        }
    }
    fold(b, line.data, line.len);
    growbuf_free(&line);
}

/* A CN parameter value: a quoted string, which cannot hold DQUOTE or control characters. */
static void put_cn(growbuf_t *b, const char *name)
{
    growbuf_puts(b, ";CN=\"");
    for (const char *p = name ? name : ""; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"')
            growbuf_puts(b, "'");
        else if (ch >= 0x20 && ch != 0x7f)
            growbuf_put(b, p, 1);
    }
    growbuf_puts(b, "\"");
}

/* An address as the addr-spec of a mailto: URI (RFC 6068 section 2): the octets that are not
 * unreserved or one of the delimiters it lets stand ("!$'()*+,;:@") are percent-encoded, so
 * "?", "#" and "%" in a local part do not start header fields, a fragment or an escape. */
static void put_mailto_address(growbuf_t *b, const char *email)
{
    static const char hex[] = "0123456789ABCDEF";
    for (const char *p = email; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        bool plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || (ch && strchr("-._~!$'()*+,;:@", ch));
        if (plain) {
            growbuf_put(b, p, 1);
        } else if (ch >= 0x20 && ch != 0x7f) {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            growbuf_put(b, e, 3);
        }
    }
}

static void person(growbuf_t *b, const char *prop, const char *params, const char *name,
                   const char *email)
{
    growbuf_t n = GROWBUF_INIT;
    growbuf_puts(&n, prop);
    if (name && *name) put_cn(&n, name);
    if (params) growbuf_puts(&n, params);
    growbuf_t v = GROWBUF_INIT;
    growbuf_puts(&v, "mailto:");
    put_mailto_address(&v, email);
    ical_line(b, n.data, v.data, false);
    growbuf_free(&n);
    growbuf_free(&v);
}

/* BEGIN:<component>, a short line. */
static void begin(growbuf_t *b, const char *component)
{
    growbuf_puts(b, "BEGIN:");
    growbuf_puts(b, component);
    growbuf_puts(b, "\r\n");
}

void ical_begin(growbuf_t *b, const ical_calendar_t *c)
{
    begin(b, "VCALENDAR");
    ical_line(b, "VERSION", "2.0", false);
    ical_line(b, "PRODID", "-//coachd//sessions//EN", false);
    ical_line(b, "CALSCALE", "GREGORIAN", false);
    if (c->method) ical_line(b, "METHOD", c->method, false);
    if (c->name) ical_line(b, "X-WR-CALNAME", c->name, true);
    if (c->timezone) ical_line(b, "X-WR-TIMEZONE", c->timezone, false);
    if (c->refresh_minutes > 0) {
        char d[32];
        snprintf(d, sizeof(d), "PT%dM", c->refresh_minutes);
        ical_line(b, "REFRESH-INTERVAL;VALUE=DURATION", d, false);
        ical_line(b, "X-PUBLISHED-TTL", d, false);
    }
}

int ical_event(growbuf_t *b, const ical_event_t *e)
{
    if (!e->uid || !*e->uid || e->end_ms <= e->start_ms) return DOMAIN_EINVAL;
    char t[17], seq[16];
    begin(b, "VEVENT");
    ical_line(b, "UID", e->uid, false);
    snprintf(seq, sizeof(seq), "%d", e->sequence < 0 ? 0 : e->sequence);
    ical_line(b, "SEQUENCE", seq, false);
    ical_utc(e->stamp_ms, t);
    ical_line(b, "DTSTAMP", t, false);
    ical_utc(e->start_ms, t);
    ical_line(b, "DTSTART", t, false);
    ical_utc(e->end_ms, t);
    ical_line(b, "DTEND", t, false);
    if (e->timezone) ical_line(b, "X-COACHD-TIMEZONE", e->timezone, false);
    ical_line(b, "STATUS", e->cancelled ? "CANCELLED" : "CONFIRMED", false);
    if (e->summary) ical_line(b, "SUMMARY", e->summary, true);
    if (e->description) ical_line(b, "DESCRIPTION", e->description, true);
    if (e->location) ical_line(b, "LOCATION", e->location, true);
    if (e->url) ical_line(b, "URL", e->url, false);
    if (e->organizer_email) person(b, "ORGANIZER", NULL, e->organizer_name, e->organizer_email);
    if (e->attendee_email)
        person(b, "ATTENDEE", ";ROLE=REQ-PARTICIPANT;PARTSTAT=NEEDS-ACTION;RSVP=FALSE",
               e->attendee_name, e->attendee_email);
    ical_line(b, "TRANSP", e->cancelled ? "TRANSPARENT" : "OPAQUE", false);
    ical_line(b, "END", "VEVENT", false);
    return 0;
}

void ical_end(growbuf_t *b)
{
    ical_line(b, "END", "VCALENDAR", false);
}

int ical_session_event(growbuf_t *b, const ical_session_t *s)
{
    if (!s->session_id || s->duration_minutes <= 0) return DOMAIN_EINVAL;
    bool es = s->lang && strcmp(s->lang, "es") == 0;
    growbuf_t summary = GROWBUF_INIT, desc = GROWBUF_INIT, uid = GROWBUF_INIT;
    char line[160];

    if (s->cancelled) growbuf_puts(&summary, es ? "Cancelada: " : "Cancelled: ");
    growbuf_puts(&summary, s->title && *s->title ? s->title
                           : es                  ? "Sesión de mentoría"
                                                 : "Mentoring session");
    if (s->start_text) {
        growbuf_puts(&desc, es ? "Inicio: " : "Start: ");
        growbuf_puts(&desc, s->start_text);
        growbuf_puts(&desc, "\n");
    }
    snprintf(line, sizeof(line), es ? "Duración: %d minutos\n" : "Duration: %d minutes\n",
             s->duration_minutes);
    growbuf_puts(&desc, line);
    growbuf_puts(&desc, es ? "Coach: " : "Coach: ");
    growbuf_puts(&desc, s->coach_name ? s->coach_name : "");
    growbuf_puts(&desc, es ? "\nDocente: " : "\nTeacher: ");
    growbuf_puts(&desc, s->teacher_name ? s->teacher_name : "");
    growbuf_puts(&desc, "\n");
    if (s->notes && *s->notes) {
        growbuf_puts(&desc, es ? "\nNotas:\n" : "\nNotes:\n");
        growbuf_puts(&desc, s->notes);
        growbuf_puts(&desc, "\n");
    }
    if (s->link) {
        growbuf_puts(&desc, es ? "\nAbrir en la aplicación: " : "\nOpen in the app: ");
        growbuf_puts(&desc, s->link);
        growbuf_puts(&desc, "\n");
    }
    growbuf_puts(&uid, s->session_id);
    growbuf_puts(&uid, "@coachd");
    ical_event_t e = {.uid = uid.data,
                      .sequence = s->sequence,
                      .start_ms = s->start_ms,
                      .end_ms = s->start_ms + (int64_t)s->duration_minutes * 60000,
                      .stamp_ms = s->stamp_ms,
                      .timezone = s->timezone,
                      .summary = summary.data,
                      .description = desc.data,
                      .location = s->link,
                      .url = s->link,
                      .organizer_name = s->coach_name,
                      .organizer_email = s->coach_email,
                      .attendee_name = s->teacher_name,
                      .attendee_email = s->teacher_email,
                      .cancelled = s->cancelled};
    int rc = ical_event(b, &e);
    growbuf_free(&summary);
    growbuf_free(&desc);
    growbuf_free(&uid);
    return rc;
}

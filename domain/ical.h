/*
 * iCalendar (RFC 5545) for session invitations (iTIP, RFC 5546: METHOD:REQUEST / CANCEL) and the
 * personal calendar feed. Pure: the caller passes every value, the stamp time included.
 *
 * Output is CRLF-terminated content lines folded at 75 octets (a continuation line starts with
 * one space, which counts) without splitting a UTF-8 sequence; TEXT values escape `\`, `;`, `,`
 * and newlines (as `\n`) and drop other control characters. Times are UTC ("...Z"); the
 * session's IANA time zone is carried for display as X-WR-TIMEZONE (calendar) and
 * X-COACHD-TIMEZONE (event), since a TZID would need a VTIMEZONE built from tz data.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "domain/growbuf.h"

#define ICAL_LINE_OCTETS 75

typedef struct ical_calendar {
    const char *method;   /* "REQUEST", "CANCEL", or NULL for a feed (no METHOD) */
    const char *name;     /* X-WR-CALNAME, or NULL */
    const char *timezone; /* X-WR-TIMEZONE, or NULL */
    int refresh_minutes;  /* > 0: REFRESH-INTERVAL and X-PUBLISHED-TTL */
} ical_calendar_t;

typedef struct ical_event {
    const char *uid; /* required: stable for the session */
    int sequence;
    int64_t start_ms, end_ms, stamp_ms;           /* epoch milliseconds */
    const char *timezone;                         /* IANA name or NULL */
    const char *summary, *description;            /* TEXT, NULL leaves them out */
    const char *location, *url;                   /* NULL leaves them out */
    const char *organizer_name, *organizer_email; /* the coach */
    const char *attendee_name, *attendee_email;   /* the teacher */
    bool cancelled;                               /* STATUS:CANCELLED, else CONFIRMED */
} ical_event_t;

/* BEGIN:VCALENDAR and its properties. */
void ical_begin(growbuf_t *b, const ical_calendar_t *c);
/* One VEVENT. 0, or DOMAIN_EINVAL when uid is missing or end is not after start. */
int ical_event(growbuf_t *b, const ical_event_t *e);
/* END:VCALENDAR. */
void ical_end(growbuf_t *b);

/* One content line "name:value" (name may carry parameters), folded, with CRLF. The value is
 * TEXT-escaped when escape is true, else written as is (control characters dropped). */
void ical_line(growbuf_t *b, const char *name, const char *value, bool escape);
/* Appends s as an escaped TEXT value (no folding). */
void ical_escape_text(growbuf_t *b, const char *s);
/* "YYYYMMDDTHHMMSSZ" of epoch milliseconds (17 bytes with the NUL). */
void ical_utc(int64_t ms, char out[17]);

/* A session as one event, with its SUMMARY and DESCRIPTION in lang (en or es; another is en).
 * UID "<session_id>@coachd" (one per session, stable across changes); ORGANIZER the coach,
 * ATTENDEE the teacher; link goes into URL and LOCATION. 0 or DOMAIN_EINVAL. */
typedef struct ical_session {
    const char *lang;
    const char *session_id;
    const char *title;      /* the mentorship's, or NULL */
    const char *notes;      /* the session's, or NULL */
    const char *start_text; /* the start as the reader's calendar-free text, or NULL */
    const char *timezone;   /* the session's */
    const char *coach_name, *coach_email, *teacher_name, *teacher_email;
    const char *link; /* the app's page of the session, or NULL */
    int sequence, duration_minutes;
    int64_t start_ms, stamp_ms;
    bool cancelled;
} ical_session_t;
int ical_session_event(growbuf_t *b, const ical_session_t *s);

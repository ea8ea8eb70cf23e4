/*
 * Streaming multipart/form-data parser (see multipart.h).
 *
 * The body is read as if it started with CRLF, so the first boundary line matches the same
 * delimiter "\r\n--boundary" as every later one. Inside a part the delimiter is searched with
 * memchr for '\r' and then byte by byte; since '\r' occurs in the delimiter only at its start,
 * a failed partial match can be emitted as data at once and the search restarts at the current
 * byte, so no byte is ever looked at twice and nothing but the delimiter prefix is carried
 * between pieces.
 */
#include "core/multipart.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

enum {
    MP_PREAMBLE,   /* before the first delimiter */
    MP_DELIM_TAIL, /* after a delimiter: "--" (final), or optional blanks then CRLF */
    MP_DELIM_DASH, /* saw one '-' after a delimiter */
    MP_DELIM_LF,   /* saw the CR of the delimiter line's end */
    MP_HEADERS,    /* collecting a header block up to the empty line */
    MP_BODY,       /* part content */
    MP_EPILOGUE,   /* after the final delimiter */
};

static int fail(multipart_t *m, int err);
static int parse_headers(multipart_t *m);
static int emit(multipart_t *m, const char *data, size_t len);
static int part_end(multipart_t *m);

static bool tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 2046 bchars: DIGIT / ALPHA / "'()+_,-./:=?" and space (not last). */
static bool bchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c != '\0' && strchr("'()+_,-./:=? ", c) != NULL);
}

int multipart_init(multipart_t *m, const char *ct, const multipart_handler_t *h, void *ud)
{
    memset(m, 0, sizeof(*m));
    m->h = h;
    m->ud = ud;
    m->error = MULTIPART_EINVAL;
    if (!ct) return MULTIPART_EINVAL;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    if (strncasecmp(ct, "multipart/form-data", 19) != 0) return MULTIPART_EINVAL;
    const char *p = ct + 19;
    char b[MULTIPART_BOUNDARY_MAX + 1];
    size_t bl = 0;
    bool found = false;
    /* Parameters: ; name=value, value a token or a quoted string. */
    while (*p) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p != ';') return MULTIPART_EINVAL;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        const char *name = p;
        while (tchar(*p))
            p++;
        size_t nl = (size_t)(p - name);
        while (*p == ' ' || *p == '\t')
            p++;
        if (nl == 0 || *p != '=') return MULTIPART_EINVAL;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        char val[MULTIPART_BOUNDARY_MAX + 1];
        size_t vl = 0;
        bool too_long = false;
        if (*p == '"') {
            p++;
            while (*p && *p != '"') {
                if (*p == '\\' && p[1]) p++;
                if (vl < MULTIPART_BOUNDARY_MAX)
                    val[vl++] = *p;
                else
                    too_long = true;
                p++;
            }
            if (*p != '"') return MULTIPART_EINVAL;
            p++;
        } else {
            while (tchar(*p)) {
                if (vl < MULTIPART_BOUNDARY_MAX)
                    val[vl++] = *p;
                else
                    too_long = true;
                p++;
            }
        }
        val[vl] = '\0';
        if (nl == 8 && strncasecmp(name, "boundary", 8) == 0) {
            if (too_long || vl == 0 || found) return MULTIPART_EINVAL;
            memcpy(b, val, vl + 1);
            bl = vl;
            found = true;
        }
    }
    if (!found || b[bl - 1] == ' ') return MULTIPART_EINVAL;
    for (size_t i = 0; i < bl; i++)
        if (!bchar(b[i])) return MULTIPART_EINVAL;
    memcpy(m->delim, "\r\n--", 4);
    memcpy(m->delim + 4, b, bl);
    m->dlen = bl + 4;
    /* The virtual CRLF before the body: the first line may be the delimiter at once. */
    m->match = 2;
    m->state = MP_PREAMBLE;
    m->error = 0;
    return 0;
}

static int fail(multipart_t *m, int err)
{
    m->error = err;
    return err;
}

/* Bytes outside every part (preamble, epilogue) are counted: they reach no callback, so without
 * a cap a client could keep an upload open with them for as long as the body limit allows. */
static int outside(multipart_t *m, size_t len)
{
    m->outside += len;
    return m->outside > MULTIPART_OUTSIDE_MAX ? MULTIPART_EOUTSIDE : 0;
}

static int emit(multipart_t *m, const char *data, size_t len)
{
    if (len == 0) return 0;
    if (m->state != MP_BODY) return outside(m, len);
    if (m->is_file) return m->h->on_file_data ? m->h->on_file_data(m->ud, data, len) : 0;
    if (m->flen + len > MULTIPART_FIELD_MAX) return MULTIPART_EFIELD;
    memcpy(m->field + m->flen, data, len);
    m->flen += len;
    return 0;
}

static int part_end(multipart_t *m)
{
    if (m->is_file) return m->h->on_file_end ? m->h->on_file_end(m->ud) : 0;
    m->field[m->flen] = '\0';
    return m->h->on_field ? m->h->on_field(m->ud, m->part.name, m->field, m->flen) : 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Appends s[0..n) to the strings area; returns its start. */
static char *str_put(multipart_t *m, size_t *used, const char *s, size_t n)
{
    char *out = m->strings + *used;
    memcpy(out, s, n);
    out[n] = '\0';
    *used += n + 1;
    return out;
}

/* RFC 5987 ext-value: charset'lang'pct-encoded. UTF-8 is kept, ISO-8859-1 widened to UTF-8.
 * Returns false when malformed or of another charset. */
static bool ext_value(multipart_t *m, size_t *used, const char *v, size_t n, const char **out)
{
    const char *q1 = memchr(v, '\'', n);
    if (!q1) return false;
    const char *q2 = memchr(q1 + 1, '\'', n - (size_t)(q1 + 1 - v));
    if (!q2) return false;
    size_t cl = (size_t)(q1 - v);
    bool utf8 = cl == 5 && strncasecmp(v, "utf-8", 5) == 0;
    bool latin1 = cl == 10 && strncasecmp(v, "iso-8859-1", 10) == 0;
    if (!utf8 && !latin1) return false;
    char *dst = m->strings + *used;
    size_t k = 0;
    for (const char *p = q2 + 1; p < v + n; p++) {
        unsigned c = (unsigned char)*p;
        if (c == '%') {
            if (v + n - p < 3) return false;
            int hi = hexval(p[1]), lo = hexval(p[2]);
            if (hi < 0 || lo < 0) return false;
            c = (unsigned)(hi * 16 + lo);
            p += 2;
        }
        if (c == 0) return false;
        if (latin1 && c >= 0x80) {
            dst[k++] = (char)(0xC0 | (c >> 6));
            dst[k++] = (char)(0x80 | (c & 0x3F));
        } else {
            dst[k++] = (char)c;
        }
    }
    dst[k] = '\0';
    *out = dst;
    *used += k + 1;
    return true;
}

/* Drops a client's directory part ("C:\dir\a.txt", "dir/a.txt"). */
static const char *base_name(const char *s)
{
    const char *b = s;
    for (const char *p = s; *p; p++)
        if (*p == '/' || *p == '\\') b = p + 1;
    return b;
}

/* Content-Disposition parameters: name, filename, filename*. */
static int parse_disposition(multipart_t *m, size_t *used, const char *v, const char *end)
{
    const char *p = v;
    while (p < end && tchar(*p))
        p++;
    if (p == v) return MULTIPART_EPARSE;
    const char *fname = NULL, *fname_ext = NULL;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == end) break;
        if (*p != ';') return MULTIPART_EPARSE;
        p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        const char *k = p;
        while (p < end && tchar(*p))
            p++;
        size_t kl = (size_t)(p - k);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (kl == 0 || p == end || *p != '=') return MULTIPART_EPARSE;
        p++;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        char *val = m->strings + *used;
        size_t vl = 0;
        if (p < end && *p == '"') {
            p++;
            while (p < end && *p != '"') {
                /* Browsers send backslashes of Windows paths unescaped; only \" and \\ are
                 * escapes here. */
                if (*p == '\\' && p + 1 < end && (p[1] == '"' || p[1] == '\\')) p++;
                val[vl++] = *p++;
            }
            if (p == end) return MULTIPART_EPARSE;
            p++;
        } else {
            while (p < end && *p != ';' && *p != ' ' && *p != '\t')
                val[vl++] = *p++;
        }
        val[vl] = '\0';
        if (kl == 4 && strncasecmp(k, "name", 4) == 0) {
            m->part.name = val;
            *used += vl + 1;
        } else if (kl == 8 && strncasecmp(k, "filename", 8) == 0) {
            fname = val;
            *used += vl + 1;
        } else if (kl == 9 && strncasecmp(k, "filename*", 9) == 0) {
            size_t at = *used;
            *used += vl + 1;
            const char *dec;
            if (ext_value(m, used, m->strings + at, vl, &dec)) fname_ext = dec;
        }
    }
    if (fname_ext)
        m->part.filename = base_name(fname_ext);
    else if (fname)
        m->part.filename = base_name(fname);
    return 0;
}

/* The header block m->header[0..hlen) without its final empty line. */
static int parse_headers(multipart_t *m)
{
    size_t used = 0;
    memset(&m->part, 0, sizeof(m->part));
    const char *p = m->header, *end = m->header + m->hlen;
    while (p < end) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        if (line_end > p && line_end[-1] == '\r') line_end--;
        if (line_end == p) break;
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (!colon) return MULTIPART_EPARSE;
        const char *v = colon + 1;
        while (v < line_end && (*v == ' ' || *v == '\t'))
            v++;
        const char *ve = line_end;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        size_t nl = (size_t)(colon - p);
        if (nl == 19 && strncasecmp(p, "content-disposition", 19) == 0) {
            int rc = parse_disposition(m, &used, v, ve);
            if (rc != 0) return rc;
        } else if (nl == 12 && strncasecmp(p, "content-type", 12) == 0) {
            m->part.content_type = str_put(m, &used, v, (size_t)(ve - v));
        }
        p = eol ? eol + 1 : end;
    }
    m->is_file = m->part.filename != NULL;
    m->flen = 0;
    if (m->is_file && m->h->on_file_begin) return m->h->on_file_begin(m->ud, &m->part);
    return 0;
}

int multipart_feed(multipart_t *m, const char *data, size_t len)
{
    const char *p = data, *end = data + len;
    int rc;
    if (m->error) return m->error;
    while (p < end) {
        switch (m->state) {
        case MP_PREAMBLE:
        case MP_BODY: {
            if (m->match == 0) {
                /* Fast path: everything up to the next CR is content. */
                const char *cr = memchr(p, '\r', (size_t)(end - p));
                const char *stop = cr ? cr : end;
                if ((rc = emit(m, p, (size_t)(stop - p))) != 0) return fail(m, rc);
                p = stop;
                if (!cr) break;
            }
            char c = *p;
            if (c == m->delim[m->match]) {
                m->match++;
                p++;
                if (m->match == m->dlen) {
                    m->match = 0;
                    if (m->state == MP_BODY && (rc = part_end(m)) != 0) return fail(m, rc);
                    m->state = MP_DELIM_TAIL;
                }
                break;
            }
            /* Mismatch: the matched prefix was content (in the preamble the virtual CRLF is
             * not). It cannot overlap a new match (CR only starts the delimiter), so retry the
             * current byte from scratch. */
            if (m->state == MP_BODY && (rc = emit(m, m->delim, m->match)) != 0) return fail(m, rc);
            m->match = 0;
            break;
        }
        case MP_DELIM_TAIL:
            if (*p == '-') {
                m->state = MP_DELIM_DASH;
            } else if (*p == '\r') {
                m->state = MP_DELIM_LF;
            } else if (*p != ' ' && *p != '\t') {
                return fail(m, MULTIPART_EPARSE);
            }
            p++;
            break;
        case MP_DELIM_DASH:
            if (*p != '-') return fail(m, MULTIPART_EPARSE);
            m->state = MP_EPILOGUE;
            p++;
            break;
        case MP_DELIM_LF:
            if (*p != '\n') return fail(m, MULTIPART_EPARSE);
            m->state = MP_HEADERS;
            m->hlen = 0;
            p++;
            break;
        case MP_HEADERS: {
            /* Up to and including the empty line (CRLF CRLF, or a CRLF at the very start). */
            char c = *p++;
            if (m->hlen == MULTIPART_HEADER_MAX) return fail(m, MULTIPART_EHEADER);
            m->header[m->hlen++] = c;
            size_t n = m->hlen;
            bool done = (n == 2 && m->header[0] == '\r' && m->header[1] == '\n') ||
                        (n >= 4 && memcmp(m->header + n - 4, "\r\n\r\n", 4) == 0);
            if (!done) break;
            m->hlen = n == 2 ? 0 : n - 2;
            m->state = MP_BODY;
            m->match = 0;
            if ((rc = parse_headers(m)) != 0) return fail(m, rc);
            break;
        }
        case MP_EPILOGUE:
            if ((rc = outside(m, (size_t)(end - p))) != 0) return fail(m, rc);
            return 0;
        }
    }
    return 0;
}

int multipart_finish(multipart_t *m)
{
    if (m->error) return m->error;
    if (m->state != MP_EPILOGUE) return fail(m, MULTIPART_ETRUNCATED);
    return 0;
}

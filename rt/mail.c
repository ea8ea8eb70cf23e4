/*
 * Outbound mail over SMTP (libcurl multi) or, in development, as .eml files written with
 * uv_fs_* calls. See rt/mail.h for the contract.
 *
 * Message format: headers and bodies use CRLF; the subject is an RFC 2047 B-encoded word list
 * when it holds anything but printable ASCII; bodies are 7bit when they are ASCII with short
 * lines, else quoted-printable (SMTP) or raw 8bit UTF-8 (.eml files, so links stay readable).
 * SMTP dot-stuffing is done by libcurl.
 */
#include "rt/mail.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "core/mem.h"
#include "domain/crypto.h"
#include "rt/curlm.h"
#include "rt/filesink.h"

#define MAIL_CONNECT_TIMEOUT_S 10L
#define MAIL_TOTAL_TIMEOUT_S 30L
#define MAIL_DEFAULT_DIR ".local/mail"

typedef struct mail_job mail_job_t;

/* One SMTP transfer or one .eml write. */
struct mail_job {
    mail_done_cb cb;
    void (*verify_cb)(bool ok, void *data);
    void *data;
    char *text; /* the whole message */
    size_t len, off;
    /* smtp */
    CURL *easy;
    struct curl_slist *rcpt;
    char errbuf[CURL_ERROR_SIZE];
    uv_fs_t fs; /* the hop of fail_later, the mail folder check */
    const char *fs_error;
};

static struct {
    uv_loop_t *loop;
} S;

static void b64_encode(buf_t *out, const unsigned char *p, size_t n);
static bool needs_encoding(const char *s);
static void put_subject(buf_t *b, const char *subject);
static void put_body(buf_t *b, const char *text, bool eight_bit);
static void put_qp(buf_t *b, const char *text);
static void put_date(buf_t *b, long long now_s);
static void random_hex(char *out, size_t nbytes);
static char *from_address(const char *from);
static const char *mail_from(void);
static const char *mail_dir(void);
static bool header_safe(const char *s);
static void smtp_send(mail_job_t *j, const char *to);
static void smtp_on_done(CURL *easy, CURLcode code, long status, void *data);
static size_t smtp_on_read(char *dst, size_t size, size_t nmemb, void *userp);
static int smtp_setup(mail_job_t *j);
static void eml_write(mail_job_t *j);
static void eml_on_written(int rc, void *data);
static void verify_on_done(CURL *easy, CURLcode code, long status, void *data);
static void verify_on_access(uv_fs_t *req);
static void job_finish(mail_job_t *j, const char *error);
static void fail_later(mail_job_t *j, const char *error);
static void on_fail_later(uv_fs_t *req);

/* ---------------------------------------------------------------------------------------- */
/* Message building                                                                         */

/* One encoded word's bytes (at most 39, see put_subject) as standard base64. */
static void b64_encode(buf_t *out, const unsigned char *p, size_t n)
{
    char q[64];
    if (n > 39 || crypto_base64_encode(p, n, q, sizeof(q)) != 0) abort(); /* callers cut at 39 */
    buf_puts(out, q);
}

/* A body part as base64 in lines of 76 characters: the calendar part keeps its exact octets
 * (CRLF line ends, folded UTF-8) on every transport. */
static void put_base64(buf_t *b, const char *text)
{
    size_t n = strlen(text);
    char q[80];
    buf_puts(b, "Content-Transfer-Encoding: base64\r\n\r\n");
    for (size_t i = 0; i < n; i += 57) {
        size_t k = n - i < 57 ? n - i : 57;
        if (crypto_base64_encode(text + i, k, q, sizeof(q)) != 0) abort(); /* 57 -> 76 */
        buf_puts(b, q);
        buf_puts(b, "\r\n");
    }
}

/* True when s holds anything but printable ASCII and spaces, or is too long for one line. */
static bool needs_encoding(const char *s)
{
    size_t n = 0;

    for (; *s; s++, n++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) return true;
    return n > 900;
}

/* Subject header value: plain when printable ASCII, else =?UTF-8?B?...?= words of at most 75
 * characters (39 input bytes give 64, so even the first line with "Subject: " stays short), split
 * on UTF-8 character boundaries and folded with CRLF SP.
 * CR and LF never reach the header. */
static void put_subject(buf_t *b, const char *subject)
{
    size_t n = strlen(subject), i = 0;
    char *clean = xmalloc(n + 1);
    size_t m = 0;

    for (i = 0; i < n; i++)
        clean[m++] = (subject[i] == '\r' || subject[i] == '\n') ? ' ' : subject[i];
    clean[m] = '\0';
    if (!needs_encoding(clean)) {
        buf_puts(b, clean);
        free(clean);
        return;
    }
    i = 0;
    while (i < m) {
        size_t end = i + 39 > m ? m : i + 39;
        /* back off to the start of a UTF-8 character */
        while (end < m && end > i && ((unsigned char)clean[end] & 0xC0) == 0x80)
            end--;
        if (end == i) end = i + 39 > m ? m : i + 39; /* invalid UTF-8: cut anyway */
        if (i > 0) buf_puts(b, "\r\n ");
        buf_puts(b, "=?UTF-8?B?");
        b64_encode(b, (const unsigned char *)clean + i, end - i);
        buf_puts(b, "?=");
        i = end;
    }
    free(clean);
}

/* Quoted-printable (RFC 2045 6.7) of text whose line breaks are already CRLF. */
static void put_qp(buf_t *b, const char *text)
{
    static const char hex[] = "0123456789ABCDEF";
    const unsigned char *p = (const unsigned char *)text;
    size_t col = 0;

    while (*p) {
        char enc[3];
        size_t w;

        if (p[0] == '\r' && p[1] == '\n') {
            buf_puts(b, "\r\n");
            col = 0;
            p += 2;
            continue;
        }
        /* Encode '=', control and 8-bit bytes, and spaces or tabs that end a line. */
        if (*p == '=' || *p > 126 || (*p < 32 && *p != '\t') ||
            ((*p == ' ' || *p == '\t') && (p[1] == '\0' || (p[1] == '\r' && p[2] == '\n')))) {
            enc[0] = '=';
            enc[1] = hex[*p >> 4];
            enc[2] = hex[*p & 15];
            w = 3;
        } else {
            enc[0] = (char)*p;
            w = 1;
        }
        if (col + w > 75) { /* soft line break keeps lines within 76 characters */
            buf_puts(b, "=\r\n");
            col = 0;
        }
        buf_append(b, enc, w);
        col += w;
        p++;
    }
}

/* Content-Transfer-Encoding header, blank line and the body (line breaks made CRLF). */
static void put_body(buf_t *b, const char *text, bool eight_bit)
{
    buf_t crlf = BUF_INIT;
    const char *p;
    size_t line = 0;
    bool ascii = true, long_lines = false;

    for (p = text; *p; p++) {
        if (*p == '\r' && p[1] == '\n') continue; /* the \n adds the pair */
        if (*p == '\n' || *p == '\r') {
            buf_puts(&crlf, "\r\n");
            line = 0;
            continue;
        }
        if ((unsigned char)*p > 0x7e) ascii = false;
        if (++line > 900) long_lines = true;
        buf_putc(&crlf, *p);
    }
    if (!crlf.data) buf_puts(&crlf, "");
    if (ascii && !long_lines) {
        buf_puts(b, "Content-Transfer-Encoding: 7bit\r\n\r\n");
        buf_append(b, crlf.data, crlf.len);
    } else if (eight_bit && !long_lines) {
        buf_puts(b, "Content-Transfer-Encoding: 8bit\r\n\r\n");
        buf_append(b, crlf.data, crlf.len);
    } else {
        buf_puts(b, "Content-Transfer-Encoding: quoted-printable\r\n\r\n");
        put_qp(b, crlf.data);
    }
    if (b->len < 2 || memcmp(b->data + b->len - 2, "\r\n", 2) != 0) buf_puts(b, "\r\n");
    buf_free(&crlf);
}

/* RFC 5322 date in UTC, independent of the C locale. */
static void put_date(buf_t *b, long long now_s)
{
    static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    time_t t = (time_t)now_s;
    struct tm tm;

    gmtime_r(&t, &tm);
    buf_printf(b, "%s, %02d %s %04d %02d:%02d:%02d +0000", days[tm.tm_wday], tm.tm_mday,
               months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

static void random_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char r[32];
    size_t i;

    if (nbytes > sizeof(r)) nbytes = sizeof(r);
    /* getrandom(2) through libuv, synchronous: it never waits once the pool is seeded. */
    if (uv_random(NULL, NULL, r, nbytes, 0, NULL) != 0)
        for (i = 0; i < nbytes; i++)
            r[i] = (unsigned char)rand();
    for (i = 0; i < nbytes; i++) {
        out[2 * i] = hex[r[i] >> 4];
        out[2 * i + 1] = hex[r[i] & 15];
    }
    out[2 * nbytes] = '\0';
}

/* "Name <a@b>" -> "a@b"; a bare address is returned trimmed. Heap string. */
static char *from_address(const char *from)
{
    const char *lt = strrchr(from, '<'), *gt;

    if (lt && (gt = strchr(lt, '>')) != NULL) return xstrndup(lt + 1, (size_t)(gt - lt - 1));
    while (*from == ' ')
        from++;
    gt = from + strlen(from);
    while (gt > from && gt[-1] == ' ')
        gt--;
    return xstrndup(from, (size_t)(gt - from));
}

static const char *mail_from(void)
{
    return cfg.mail_from && *cfg.mail_from ? cfg.mail_from : "coachd <no-reply@localhost>";
}

static const char *mail_dir(void)
{
    return cfg.mail_dir && *cfg.mail_dir ? cfg.mail_dir : MAIL_DEFAULT_DIR;
}

static bool header_safe(const char *s)
{
    return s && *s && !strpbrk(s, "\r\n");
}

char *mail_build(const mail_envelope_t *msg, const char *from, bool eight_bit, long long now_s)
{
    buf_t b = BUF_INIT;
    char id[33], boundary[25];
    char *addr = from_address(from);
    const char *at = strchr(addr, '@');

    random_hex(id, 16);
    if (msg->message_id && *msg->message_id && strlen(msg->message_id) < sizeof(id) &&
        strspn(msg->message_id, "0123456789abcdefghijklmnopqrstuvwxyz.-") ==
            strlen(msg->message_id))
        snprintf(id, sizeof(id), "%s", msg->message_id);
    buf_puts(&b, "Date: ");
    put_date(&b, now_s);
    buf_printf(&b, "\r\nFrom: %s\r\nTo: %s\r\nSubject: ", from, msg->to);
    put_subject(&b, msg->subject);
    buf_printf(&b, "\r\nMessage-ID: <%s@%s>\r\nMIME-Version: 1.0\r\n", id,
               at && at[1] ? at + 1 : "localhost");
    char mixed[25];
    if (msg->ics) {
        random_hex(mixed, 12);
        buf_printf(&b, "Content-Type: multipart/mixed; boundary=\"=_%s\"\r\n\r\n", mixed);
        buf_puts(&b, "This is a multi-part message in MIME format.\r\n");
        buf_printf(&b, "\r\n--=_%s\r\n", mixed);
    }
    if (!msg->html) {
        buf_puts(&b, "Content-Type: text/plain; charset=UTF-8\r\n");
        put_body(&b, msg->text, eight_bit);
    } else {
        random_hex(boundary, 12);
        buf_printf(&b, "Content-Type: multipart/alternative; boundary=\"=_%s\"\r\n\r\n", boundary);
        buf_puts(&b, "This is a multi-part message in MIME format.\r\n");
        buf_printf(&b, "\r\n--=_%s\r\nContent-Type: text/plain; charset=UTF-8\r\n", boundary);
        put_body(&b, msg->text, eight_bit);
        buf_printf(&b, "\r\n--=_%s\r\nContent-Type: text/html; charset=UTF-8\r\n", boundary);
        put_body(&b, msg->html, eight_bit);
        buf_printf(&b, "\r\n--=_%s--\r\n", boundary);
    }
    if (msg->ics) {
        const char *method =
            msg->ics_method && strcmp(msg->ics_method, "CANCEL") == 0 ? "CANCEL" : "REQUEST";
        buf_printf(&b,
                   "\r\n--=_%s\r\nContent-Type: text/calendar; method=%s; charset=UTF-8; "
                   "name=\"invite.ics\"\r\nContent-Disposition: attachment; "
                   "filename=\"invite.ics\"\r\n",
                   mixed, method);
        put_base64(&b, msg->ics);
        buf_printf(&b, "\r\n--=_%s--\r\n", mixed);
    }
    free(addr);
    return buf_steal(&b);
}

/* ---------------------------------------------------------------------------------------- */
/* Setup                                                                                     */

int mail_init(uv_loop_t *loop)
{
    S.loop = loop;
    if (!cfg.smtp_url) {
        if (cfg.production) {
            log_warn("mail: SMTP_URL is not set; mail cannot be sent");
        } else if (filesink_mkdir(mail_dir()) != 0) {
            log_error("mail: cannot create %s: %s", mail_dir(), strerror(errno));
            return -1;
        } else {
            log_info("mail: no SMTP_URL, writing messages to %s", mail_dir());
        }
    }
    return 0;
}

void mail_shutdown(void)
{
    S.loop = NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Sending                                                                                   */

void mail_send(const mail_envelope_t *msg, mail_done_cb cb, void *data)
{
    mail_job_t *j = xcalloc(1, sizeof(*j));

    j->cb = cb;
    j->data = data;
    if (!header_safe(msg->to) || !msg->subject || !msg->text) {
        fail_later(j, "invalid message (recipient, subject or text)");
        return;
    }
    if (!S.loop) {
        /* not initialised or shut down: there is no loop to defer to */
        cb("mail is not running", data);
        free(j);
        return;
    }
    if (!cfg.smtp_url && cfg.production) {
        fail_later(j, "mail transport not configured");
        return;
    }
    j->text = mail_build(msg, mail_from(), !cfg.smtp_url, (long long)time(NULL));
    j->len = strlen(j->text);
    if (cfg.smtp_url)
        smtp_send(j, msg->to);
    else
        eml_write(j);
}

static void job_finish(mail_job_t *j, const char *error)
{
    if (j->cb)
        j->cb(error, j->data);
    else if (j->verify_cb)
        j->verify_cb(error == NULL, j->data);
    if (j->easy) curl_easy_cleanup(j->easy);
    curl_slist_free_all(j->rcpt);
    free(j->text);
    free(j);
}

/* Fails from the loop, never inside mail_send: a no-op fs request gives us the hop. */
static void fail_later(mail_job_t *j, const char *error)
{
    j->fs_error = error;
    j->fs.data = j;
    if (!S.loop || uv_fs_stat(S.loop, &j->fs, ".", on_fail_later) != 0) {
        job_finish(j, error);
    }
}

static void on_fail_later(uv_fs_t *req)
{
    mail_job_t *j = req->data;

    uv_fs_req_cleanup(req);
    job_finish(j, j->fs_error);
}

/* Common curl options: URL without credentials (they go to USERNAME/PASSWORD), timeouts,
 * opportunistic STARTTLS on smtp:// (smtps:// is TLS from the start). */
static int smtp_setup(mail_job_t *j)
{
    CURLU *u = curl_url();
    char *user = NULL, *pass = NULL, *url = NULL;
    int rc = -1;

    if (curl_url_set(u, CURLUPART_URL, cfg.smtp_url, 0) != CURLUE_OK) goto done;
    curl_url_get(u, CURLUPART_USER, &user, CURLU_URLDECODE);
    curl_url_get(u, CURLUPART_PASSWORD, &pass, CURLU_URLDECODE);
    curl_url_set(u, CURLUPART_USER, NULL, 0);
    curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
    if (curl_url_get(u, CURLUPART_URL, &url, 0) != CURLUE_OK) goto done;
    j->easy = curl_easy_init();
    if (!j->easy) goto done;
    curl_easy_setopt(j->easy, CURLOPT_URL, url);
    if (user) curl_easy_setopt(j->easy, CURLOPT_USERNAME, user);
    if (pass) curl_easy_setopt(j->easy, CURLOPT_PASSWORD, pass);
    curl_easy_setopt(j->easy, CURLOPT_USE_SSL, (long)CURLUSESSL_TRY);
    curl_easy_setopt(j->easy, CURLOPT_CONNECTTIMEOUT, MAIL_CONNECT_TIMEOUT_S);
    curl_easy_setopt(j->easy, CURLOPT_TIMEOUT, MAIL_TOTAL_TIMEOUT_S);
    curl_easy_setopt(j->easy, CURLOPT_ERRORBUFFER, j->errbuf);
    rc = 0;
done:
    curl_free(user);
    curl_free(pass);
    curl_free(url);
    curl_url_cleanup(u);
    return rc;
}

static void smtp_send(mail_job_t *j, const char *to)
{
    char *from = from_address(mail_from());
    char *rcpt;
    size_t n;

    if (smtp_setup(j) != 0) {
        free(from);
        fail_later(j, "invalid SMTP_URL");
        return;
    }
    n = strlen(to) + 3;
    rcpt = xmalloc(n);
    snprintf(rcpt, n, "<%s>", to);
    j->rcpt = curl_slist_append(NULL, rcpt);
    free(rcpt);
    n = strlen(from) + 3;
    rcpt = xmalloc(n);
    snprintf(rcpt, n, "<%s>", from);
    curl_easy_setopt(j->easy, CURLOPT_MAIL_FROM, rcpt); /* curl copies option strings */
    free(rcpt);
    free(from);
    curl_easy_setopt(j->easy, CURLOPT_MAIL_RCPT, j->rcpt);
    curl_easy_setopt(j->easy, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(j->easy, CURLOPT_INFILESIZE_LARGE, (curl_off_t)j->len);
    curl_easy_setopt(j->easy, CURLOPT_READFUNCTION, smtp_on_read);
    curl_easy_setopt(j->easy, CURLOPT_READDATA, j);
    curlm_add(j->easy, smtp_on_done, j);
}

static size_t smtp_on_read(char *dst, size_t size, size_t nmemb, void *userp)
{
    mail_job_t *j = userp;
    size_t n = size * nmemb;

    if (n > j->len - j->off) n = j->len - j->off;
    memcpy(dst, j->text + j->off, n);
    j->off += n;
    return n;
}

static void smtp_on_done(CURL *easy, CURLcode code, long status, void *data)
{
    mail_job_t *j = data;
    char err[CURL_ERROR_SIZE + 96];

    (void)easy;
    if (code == CURLE_OK) {
        job_finish(j, NULL);
        return;
    }
    snprintf(err, sizeof(err), "smtp: %s (%ld)%s%s", curl_easy_strerror(code), status,
             j->errbuf[0] ? ": " : "", j->errbuf);
    job_finish(j, err);
}

/* .eml files: written whole or not at all (rt/filesink.h), so a reader never sees half a
 * message. */
static void eml_write(mail_job_t *j)
{
    if (filesink_write(S.loop, "mail", mail_dir(), ".eml", j->text, j->len, eml_on_written, j) != 0)
        fail_later(j, "cannot open mail file");
}

static void eml_on_written(int rc, void *data)
{
    job_finish(data, rc == 0                ? NULL
                     : rc == FILESINK_EOPEN ? "cannot open mail file"
                                            : "cannot write mail file");
}

/* ---------------------------------------------------------------------------------------- */
/* Transport check                                                                           */

static void verify_on_done(CURL *easy, CURLcode code, long status, void *data)
{
    mail_job_t *j = data;

    (void)easy;
    (void)status;
    if (code != CURLE_OK) log_warn("mail: SMTP check failed: %s", curl_easy_strerror(code));
    job_finish(j, code == CURLE_OK ? NULL : "smtp check failed");
}

static void verify_on_access(uv_fs_t *req)
{
    mail_job_t *j = req->data;
    int rc = (int)req->result;

    uv_fs_req_cleanup(req);
    job_finish(j, rc == 0 ? NULL : "mail dir not writable");
}

void mail_verify(void (*cb)(bool ok, void *data), void *data)
{
    mail_job_t *j = xcalloc(1, sizeof(*j));

    j->verify_cb = cb;
    j->data = data;
    j->fs.data = j;
    if (!S.loop) {
        cb(false, data);
        free(j);
        return;
    }
    if (!cfg.smtp_url) {
        if (cfg.production) {
            fail_later(j, "mail transport not configured");
            return;
        }
        if (uv_fs_access(S.loop, &j->fs, mail_dir(), W_OK, verify_on_access) != 0)
            fail_later(j, "mail dir not writable");
        return;
    }
    if (smtp_setup(j) != 0) {
        fail_later(j, "invalid SMTP_URL");
        return;
    }
    /* connect, greeting, EHLO, STARTTLS and AUTH, then stop */
    curl_easy_setopt(j->easy, CURLOPT_CONNECT_ONLY, 1L);
    curlm_add(j->easy, verify_on_done, j);
}

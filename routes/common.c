/* Shared route helpers (see common.h). */
#include "routes/common.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/json.h"
#include "core/random.h"
#include "core/log.h"
#include "core/router.h"
#include "db/db.h"
#include "routes/context.h"
#include "rt/ratelimit.h"
#include "domain/crypto.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/pwpolicy.h"
#include "domain/text.h"
#include "domain/urlcheck.h"
#include "domain/validate.h"

void verr_add(verr_t *v, const char *field, const char *message)
{
    if (v->n++) buf_putc(&v->details, ',');
    buf_puts(&v->details, "{\"field\":");
    buf_json_str(&v->details, field);
    buf_puts(&v->details, ",\"message\":");
    buf_json_str(&v->details, message);
    buf_putc(&v->details, '}');
}

int password_hash_fresh(const char *password, char *out)
{
    uint8_t salt[PASSWORD_SALT_LEN];
    random_bytes(salt, sizeof(salt));
    return password_hash(password, salt, out, PASSWORD_ENCODED_MAX);
}

void query_paging(http_req_t *req, verr_t *v, int def, int max, const char **limit,
                  const char **offset)
{
    int l = def, o = 0;
    const char *ls = http_req_query(req, "limit");
    const char *os = http_req_query(req, "offset");
    if (ls && validate_int(ls, 1, max, &l) != 0) {
        verr_add(v, "limit", arena_printf(&req->arena, "must be an integer from 1 to %d", max));
        l = def;
    }
    if (os && validate_int(os, 0, 2147483647, &o) != 0) {
        verr_add(v, "offset", "must be a non-negative integer");
        o = 0;
    }
    *limit = arena_printf(&req->arena, "%d", l);
    *offset = arena_printf(&req->arena, "%d", o);
}

const char *field_timezone(http_req_t *req, json_t *body, const char *key, verr_t *v,
                           bool present_required)
{
    if (!json_object_get(body, key)) return NULL;
    int before = v->n;
    const char *s = field_str(req, body, key, v, present_required, 1, VALIDATE_TZ_MAX, true);
    if (!s || v->n != before) return NULL;
    if (!validate_is_timezone(s)) {
        verr_add(v, key, "must be an IANA time zone such as Europe/Madrid");
        return NULL;
    }
    return s;
}

const char *path_param_name(http_req_t *req, int i)
{
    const char *p = req->route ? req->route->pattern : NULL;
    for (int n = 0; p && (p = strchr(p, ':')) != NULL; n++) {
        p++;
        /* A parameter ends at the next segment or at a fixed suffix (":token.ics"). */
        size_t len = strcspn(p, "/.");
        if (n == i) return arena_strndup(&req->arena, p, len);
        len = strcspn(p, "/");
        p += len;
    }
    return "id";
}

static void reply_one_field(http_req_t *req, const char *field, const char *top,
                            const char *message)
{
    buf_t d = BUF_INIT;
    buf_puts(&d, "[{\"field\":");
    buf_json_str(&d, field);
    buf_puts(&d, ",\"message\":");
    buf_json_str(&d, message);
    buf_puts(&d, "}]");
    char *details = arena_strndup(&req->arena, d.data, d.len);
    buf_free(&d);
    http_reply_error_details(req, 400, "VALIDATION_ERROR", top, details);
}

void reply_field_invalid(http_req_t *req, const char *field, const char *message)
{
    reply_one_field(req, field, message, message);
}

static void path_param_reply(http_req_t *req, int i, const char *top, const char *message)
{
    reply_one_field(req, path_param_name(req, i), top, message);
}

void path_param_reply_invalid(http_req_t *req, int i, const char *message)
{
    path_param_reply(req, i, "Invalid path parameter", message);
}

bool path_uuid_ok_or_reply(http_req_t *req, int i, const char **out)
{
    const char *s = http_req_param(req, i);
    if (s && ids_is_uuid(s)) {
        *out = lower_ascii(req, s);
        return true;
    }
    path_param_reply(req, i, "Invalid id", "must be a UUID");
    return false;
}

bool path_user_id_ok_or_reply(http_req_t *req, int i, bool allow_me, const char **out)
{
    const char *s = http_req_param(req, i);
    if (s && allow_me && strcmp(s, "me") == 0) {
        *out = context_caller(req)->user_id;
        return true;
    }
    if (s && ids_is_cuid(s)) {
        *out = s;
        return true;
    }
    path_param_reply(req, i, "Invalid id",
                     allow_me ? "must be a user id (CUID) or me" : "must be a user id (CUID)");
    return false;
}

bool verr_reply(http_req_t *req, verr_t *v)
{
    if (v->n == 0) {
        buf_free(&v->details);
        return false;
    }
    buf_t d = BUF_INIT;
    buf_putc(&d, '[');
    buf_append(&d, v->details.data, v->details.len);
    buf_putc(&d, ']');
    const char *msg = v->n == 1 ? "Invalid request: one field failed validation"
                                : "Invalid request: several fields failed validation";
    char *details = arena_strndup(&req->arena, d.data, d.len);
    buf_free(&d);
    buf_free(&v->details);
    http_reply_error_details(req, 400, "VALIDATION_ERROR", msg, details);
    return true;
}

const char *field_str(http_req_t *req, json_t *body, const char *key, verr_t *v, bool required,
                      size_t min_cp, size_t max_cp, bool trim)
{
    json_t *j = json_object_get(body, key);
    if (!j || json_is_null(j)) {
        if (required) verr_add(v, key, "is required");
        return NULL;
    }
    if (!json_is_string(j)) {
        verr_add(v, key, "must be a string");
        return NULL;
    }
    const char *s = json_string_value(j);
    size_t n = json_string_length(j);
    if (memchr(s, '\0', n) || !text_utf8_valid(s, n)) {
        verr_add(v, key, "must be valid UTF-8 text");
        return NULL;
    }
    size_t off = 0, len = n;
    if (trim) text_trim(s, n, &off, &len);
    size_t cp = text_cp_count(s + off, len);
    if (cp < min_cp || cp > max_cp) {
        char msg[96];
        if (min_cp > 0 && cp < min_cp && min_cp == 1)
            snprintf(msg, sizeof(msg), "must not be empty");
        else
            snprintf(msg, sizeof(msg), "must be %zu to %zu characters", min_cp, max_cp);
        verr_add(v, key, msg);
        return NULL;
    }
    return arena_strndup(&req->arena, s + off, len);
}

const char *field_email(http_req_t *req, json_t *body, const char *key, verr_t *v, bool required)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, required, 0, 320, true);
    if (!s || v->n != before) return NULL;
    char out[VALIDATE_EMAIL_MAX + 1];
    if (validate_email_lower(s, out, sizeof(out)) != 0) {
        verr_add(v, key, "must be a valid email address");
        return NULL;
    }
    return arena_strdup(&req->arena, out);
}

const char *field_password(http_req_t *req, json_t *body, const char *key, verr_t *v, bool required)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, required, 0, 100000, false);
    if (!s || v->n != before) return NULL;
    if (!password_length_ok(s)) {
        verr_add(v, key, "must be 8 to 128 characters");
        return NULL;
    }
    if (pwpolicy_is_common(s)) {
        verr_add(v, key, pwpolicy_message(PWPOLICY_COMMON));
        return NULL;
    }
    return s;
}

bool password_rules_add(verr_t *v, const char *key, const char *password, const char *email,
                        const char *first, const char *last)
{
    pwpolicy_rule_t r = pwpolicy_check(password, email, first, last);
    if (r == PWPOLICY_OK) return true;
    verr_add(v, key, pwpolicy_message(r));
    return false;
}

void mail_pair_params(http_req_t *req, mail_msg_t *en, mail_msg_t *es, const char **params)
{
    params[0] = arena_strdup(&req->arena, en->subject);
    params[1] = arena_strdup(&req->arena, en->text);
    params[2] = arena_strdup(&req->arena, en->html);
    params[3] = arena_strdup(&req->arena, es->subject);
    params[4] = arena_strdup(&req->arena, es->text);
    params[5] = arena_strdup(&req->arena, es->html);
    mail_msg_free(en);
    mail_msg_free(es);
}

void account_notice_params(http_req_t *req, mail_notice_t kind, const char **params)
{
    mail_msg_t en = {0}, es = {0};
    /* Only a kind outside the enum fails: a programming error. */
    if (mail_render_account_notice("en", kind, &en) != 0 ||
        mail_render_account_notice("es", kind, &es) != 0)
        abort();
    mail_pair_params(req, &en, &es, params);
}

bool password_rules_or_reply(http_req_t *req, const char *key, const char *password,
                             const char *email, const char *first, const char *last)
{
    verr_t v = {0};
    if (password_rules_add(&v, key, password, email, first, last)) return true;
    verr_reply(req, &v);
    return false;
}

const char *field_lang(http_req_t *req, json_t *body, const char *key, verr_t *v)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, false, 0, 16, true);
    if (!s || v->n != before) return NULL;
    if (!validate_is_lang(s)) {
        verr_add(v, key, "must be en or es");
        return NULL;
    }
    return s;
}

bool redirect_allowed(const char *url)
{
    if (urlcheck_is_relative(url)) return true;
    if (urlcheck_is_allowed(url, (const char *const *)cfg.trusted_origins,
                            (size_t)cfg.n_trusted_origins))
        return true;
    const char *fe[] = {cfg.frontend_url};
    return urlcheck_is_allowed(url, fe, 1);
}

const char *field_redirect(http_req_t *req, json_t *body, const char *key, verr_t *v)
{
    int before = v->n;
    const char *s = field_str(req, body, key, v, false, 0, 2048, true);
    if (!s || v->n != before || !*s) return NULL;
    if (!redirect_allowed(s)) {
        verr_add(v, key, "must be a relative path or a URL of a trusted origin");
        return NULL;
    }
    return s;
}

const char *resolve_lang(http_req_t *req, const char *explicit_lang)
{
    if (explicit_lang && validate_is_lang(explicit_lang)) return explicit_lang;
    const char *al = validate_accept_language(http_req_header(req, "Accept-Language"));
    return al ? al : "en";
}

void new_uuid(char out[IDS_UUID_LEN + 1])
{
    uint8_t rnd[16];
    random_bytes(rnd, sizeof(rnd));
    ids_uuid_v4(rnd, out);
}

void new_cuid(char out[IDS_CUID_LEN + 1])
{
    static uint32_t counter;
    static uint32_t fingerprint;
    if (!fingerprint) {
        random_bytes(&fingerprint, sizeof(fingerprint));
        fingerprint ^= (uint32_t)getpid();
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    uint64_t ms = (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
    uint8_t rnd[IDS_CUID_RANDOM_BYTES];
    random_bytes(rnd, sizeof(rnd));
    ids_cuid(ms, counter++, fingerprint, rnd, out);
}

void new_token(char token[TOKEN_LEN + 1], char hash[TOKEN_HASH_LEN + 1])
{
    uint8_t rnd[TOKEN_RANDOM_BYTES];
    random_bytes(rnd, sizeof(rnd));
    token_from_random(rnd, sizeof(rnd), token, TOKEN_LEN + 1);
    token_hash(token, hash);
}

void split_name(http_req_t *req, const char *name, const char **first, const char **last)
{
    const char *sp = strchr(name, ' ');
    if (!sp) {
        *first = arena_strdup(&req->arena, name);
        *last = NULL;
        return;
    }
    *first = arena_strndup(&req->arena, name, (size_t)(sp - name));
    while (*sp == ' ')
        sp++;
    *last = *sp ? arena_strdup(&req->arena, sp) : NULL;
}

void cookie_set_session(http_req_t *req, const char *token)
{
    char v[256];
    /* A session never lives past SESSION_ABSOLUTE_DAYS: neither does a fresh cookie. */
    int max_age = 7 * 24 * 3600;
    if (cfg.session_absolute_seconds < max_age) max_age = (int)cfg.session_absolute_seconds;
    snprintf(v, sizeof(v), "auth.session_token=%s; Max-Age=%d; Path=/; HttpOnly; SameSite=Lax%s",
             token, max_age, cfg.production ? "; Secure" : "");
    http_res_header(req, "Set-Cookie", v);
}

void cookie_clear_session(http_req_t *req)
{
    char v[160];
    snprintf(v, sizeof(v), "auth.session_token=; Max-Age=0; Path=/; HttpOnly; SameSite=Lax%s",
             cfg.production ? "; Secure" : "");
    http_res_header(req, "Set-Cookie", v);
}

void reply_db_json(http_req_t *req, int status, const struct db_result *r)
{
    const char *json = db_get(r, 0, REPLY_DB_JSON_COL);
    if (!json) {
        http_reply_error(req, 500, "INTERNAL", "Internal error");
        return;
    }
    http_reply_jsonn(req, status, json, db_getlen(r, 0, REPLY_DB_JSON_COL));
}

void json_member(buf_t *b, const char *prefix, const db_result_t *r, int row, int col)
{
    buf_puts(b, prefix);
    buf_json_str(b, db_get(r, row, col));
}

static const char *seconds(http_req_t *req, int n)
{
    return n == 1 ? "1 second" : arena_printf(&req->arena, "%d seconds", n);
}

void rate_limit_reply(http_req_t *req, const char *what, const char *whom, int points, int window,
                      int retry_after)
{
    const char *msg =
        arena_printf(&req->arena, "Too many %s%s%s: at most %d per %s; try again in %s", what,
                     whom ? " " : "", whom ? whom : "", points,
                     window == 1 ? "second" : seconds(req, window), seconds(req, retry_after));
    http_reply_rate_limited(req, "RATE_LIMITED", msg, retry_after);
}

typedef struct limit_state {
    http_req_t *req;
    http_req_cb next;
    const char *kind;
} limit_state_t;

/* What each kind of the auth limiter counts, as its 429 names it. */
static const char *auth_limit_what(const char *kind)
{
    static const char *const names[][2] = {
        {"sign-in", "sign-in attempts"},
        {"sign-up", "sign-ups"},
        {"forget-password", "password-reset requests"},
        {"invite-accept", "invite acceptances"},
        {"first-run", "first-run attempts"},
        {"calendar-feed", "calendar feed requests with an unknown token"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(kind, names[i][0]) == 0) return names[i][1];
    return "attempts";
}

static void on_auth_limit(bool allowed, int retry_after, int over, bool error, void *data)
{
    limit_state_t *ls = data;
    http_req_t *req = ls->req;
    if (!http_req_gone(req)) {
        if (error) {
            log_warn("auth limiter unavailable; allowing id=%s", req->id);
            ls->next(req);
        } else if (!allowed) {
            const char *whom = (over & RATELIMIT_KEY1) && (over & RATELIMIT_KEY2)
                                   ? "from this address and for this email address"
                               : (over & RATELIMIT_KEY2) ? "for this email address"
                               : (over & RATELIMIT_KEY1) ? "from this address"
                                                         : NULL;
            rate_limit_reply(req, auth_limit_what(ls->kind), whom, cfg.auth_rate_limit_points,
                             cfg.auth_rate_limit_duration, retry_after);
        } else {
            ls->next(req);
        }
    }
    http_req_unref(req);
}

void auth_limit_then(http_req_t *req, const char *kind, const char *email, http_req_cb next)
{
    if (cfg.auth_rate_limit_points <= 0) {
        next(req);
        return;
    }
    limit_state_t *ls = arena_alloc(&req->arena, sizeof(*ls));
    ls->req = req;
    ls->next = next;
    ls->kind = kind;
    const char *k1 = arena_printf(&req->arena, "rl:auth:%s:ip:%s", kind, req->client_ip);
    const char *k2 = email ? arena_printf(&req->arena, "rl:auth:%s:email:%s", kind, email) : NULL;
    http_req_ref(req);
    ratelimit_hit_keys(k1, k2, cfg.auth_rate_limit_points, cfg.auth_rate_limit_duration,
                       on_auth_limit, ls);
}

const char *display_name(http_req_t *req, const char *first, const char *last)
{
    if (first && last) return arena_printf(&req->arena, "%s %s", first, last);
    return first ? first : (last ? last : "");
}

const char *lower_ascii(http_req_t *req, const char *s)
{
    if (!s) return NULL;
    char *o = arena_strdup(&req->arena, s);
    for (char *p = o; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    return o;
}

/* True when the header value lists `token` (an entity tag or an encoding) with a q above 0:
 * "gzip, deflate, br", "gzip;q=0.5", and for If-None-Match (etags) "\"a\", \"b\"" or "*".
 * If-None-Match compares weakly (RFC 9110 13.1.2): W/"a" is the tag "a" (a proxy that weakens
 * the tag sends it back so). */
bool header_lists(const char *value, const char *token, bool etags)
{
    size_t tlen = strlen(token);
    const char *p = value;
    while (p && *p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *end = p;
        while (*end && *end != ',' && *end != ';' && *end != ' ' && *end != '\t')
            end++;
        size_t n = (size_t)(end - p);
        bool match = etags && n == 1 && *p == '*';
        const char *tag = p;
        if (etags && n > 2 && tag[0] == 'W' && tag[1] == '/') tag += 2, n -= 2;
        /* Entity tags compare byte for byte; encodings ignore case. */
        match = match || (n == tlen &&
                          (etags ? strncmp(tag, token, n) == 0 : strncasecmp(tag, token, n) == 0));
        const char *next = strchr(end, ',');
        if (match) {
            /* A parameter "q=0" (or 0.0...) refuses it. */
            const char *q = end;
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q != ';') return true;
            q++;
            while (*q == ' ' || *q == '\t')
                q++;
            if (tolower((unsigned char)q[0]) != 'q' || q[1] != '=') return true;
            return strtod(q + 2, NULL) > 0;
        }
        p = next;
    }
    return false;
}

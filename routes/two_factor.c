/*
 * Two-factor sign-in under /api/auth/two-factor (better-auth's twoFactor plugin: its paths,
 * bodies, answers and cookie names, with coachd's cookie prefix "auth.").
 *
 * - enable {password}: a fresh TOTP secret (sealed with AES-256-GCM under one subkey of
 *   TWO_FACTOR_ENCRYPTION_KEY, the user id as associated data) and ten backup codes (kept as
 *   hashes keyed with the other subkey); two-factor turns on with the first accepted
 *   verify-totp.
 * - get-totp-uri {password}: the URI again, only while the setup is not verified yet (after
 *   that the secret never leaves the server).
 * - verify-totp / verify-backup-code {code, trustDevice?}: with a session, confirms the setup
 *   (or spends a backup code); without one, the auth.two_factor cookie of a sign-in names the
 *   challenge, and a right code ends it with a session (and a trusted device when asked).
 * - disable {password}, generate-backup-codes {password}.
 * Wrong passwords share the account's limit of the password change (routes/account.c); wrong
 * codes are limited per user (TF_FAIL_POINTS per TF_FAIL_WINDOW) on top of the auth limiter
 * per IP and per user. Both limits count each attempt before its check and give it back when it
 * succeeded (ratelimit_refund), so parallel attempts cannot pass together before any failure is
 * counted. Each TOTP step is accepted once per user (two_factors.last_step).
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/json.h"
#include "core/log.h"
#include "core/offload.h"
#include "core/random.h"
#include "core/router.h"
#include "core/url.h"
#include "db/db.h"
#include "db/q_two_factor.h"
#include "domain/crypto.h"
#include "domain/mail_templates.h"
#include "domain/password.h"
#include "domain/totp.h"
#include "routes/common.h"
#include "routes/context.h"
#include "routes/ctx_cache.h"
#include "routes/dbreq.h"
#include "routes/routes.h"
#include "routes/two_factor.h"
#include "rt/outbox.h"
#include "rt/ratelimit.h"

#define PW_FAIL_POINTS 5 /* shared with the password change: one budget per account */
#define PW_FAIL_WINDOW (15 * 60)
#define TF_FAIL_POINTS 5 /* wrong codes per user */
#define TF_FAIL_WINDOW (15 * 60)
#define TF_COOKIE "auth.two_factor"
#define TRUST_COOKIE "auth.trust_device"
#define TF_COOKIE_SECONDS 600
#define TRUST_COOKIE_SECONDS (30 * 24 * 3600)
#define ISSUER_DEFAULT "coachd"

typedef struct tf_state {
    /* body */
    const char *password;
    const char *code;
    const char *issuer;
    bool trust_device;
    /* who */
    const char *user_id;
    const char *email;
    const char *lang;
    bool session_mode; /* a signed-in caller, else a sign-in challenge */
    char challenge_h[TOKEN_HASH_LEN + 1];
    /* stored */
    const char *stored_hash;
    bool enabled;
    const char *sealed; /* NULL: no two-factor row */
    bool verified;
    long long last_step;
    int verify_rc;
    /* what runs once the password matched */
    http_req_cb after_password;
    /* the verify step (totp or backup) */
    bool backup;
    long long step;
    char backup_h[65];
    char session_token[TOKEN_LEN + 1];
    char trust_token[TOKEN_LEN + 1];
    struct enable_out *out; /* fresh secret URI and backup codes for the reply */
    /* sign-in hook */
    http_req_cb sign_in_next;
    void *sign_in_data; /* the sign-in's own req->data, restored before next */
} tf_state_t;

/* TWO_FACTOR_ENCRYPTION_KEY's two subkeys (totp_subkeys), derived once at start
 * (routes_two_factor_register): one seals TOTP secrets, the other keys the backup code hashes. */
static uint8_t tf_seal_key[TOTP_KEY_LEN];
static uint8_t tf_backup_key[TOTP_KEY_LEN];
static bool tf_keys_ready;

static void keys_derive(void)
{
    uint8_t key[TOTP_KEY_LEN];
    if (cfg.two_factor_key_set) {
        memcpy(key, cfg.two_factor_key, sizeof key);
    } else if (!cfg.production) {
        /* Development only: a fixed key derived from a public string (docs/operations.md). */
        static const char dev[] = "coachd development two-factor key";
        crypto_sha256(dev, sizeof dev - 1, key);
    } else {
        return;
    }
    totp_subkeys(key, tf_seal_key, tf_backup_key);
    memset(key, 0, sizeof key);
    tf_keys_ready = true;
}

static bool key_ok_or_reply(http_req_t *req)
{
    if (tf_keys_ready) return true;
    http_reply_error(req, 503, "UNAVAILABLE",
                     "Two-factor sign-in is not configured: set TWO_FACTOR_ENCRYPTION_KEY");
    return false;
}

static void cookie_set(http_req_t *req, const char *name, const char *value, int max_age)
{
    char v[256];
    snprintf(v, sizeof(v), "%s=%s; Max-Age=%d; Path=/; HttpOnly; SameSite=Lax%s", name, value,
             max_age, cfg.production ? "; Secure" : "");
    http_res_header(req, "Set-Cookie", v);
}

/* ---- shared: password re-check ---- */

static const char *pw_fail_key(http_req_t *req, const char *user_id)
{
    return arena_printf(&req->arena, "rl:pw-change:%s", user_id);
}

static void pw_work(void *data)
{
    tf_state_t *st = data;
    st->verify_rc = st->stored_hash ? password_verify(st->stored_hash, st->password)
                                    : password_verify_dummy(st->password);
    if (!st->stored_hash) st->verify_rc = -1;
}

static void pw_on_worked(http_req_t *req, void *data)
{
    tf_state_t *st = data;
    if (st->verify_rc != 0) {
        /* Counted before the check (pw_on_taken). */
        reply_field_invalid(req, "password", "is incorrect");
        return;
    }
    ratelimit_refund(pw_fail_key(req, st->user_id));
    st->after_password(req);
}

static void on_state(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    tf_state_t *st = req->data;
    if (db_nrows(r) != 1) {
        http_reply_error(req, 401, "UNAUTHENTICATED", "Authentication required");
        return;
    }
    const char *h = db_get(r, 0, TWO_FACTOR_STATE_PASSWORD_HASH);
    st->stored_hash = h ? arena_strdup(&req->arena, h) : NULL;
    st->email = arena_strdup(&req->arena, db_get(r, 0, TWO_FACTOR_STATE_EMAIL));
    const char *en = db_get(r, 0, TWO_FACTOR_STATE_TWO_FACTOR_ENABLED);
    st->enabled = en && en[0] == 't';
    const char *s = db_get(r, 0, TWO_FACTOR_STATE_SECRET_SEALED);
    st->sealed = s ? arena_strdup(&req->arena, s) : NULL;
    const char *v = db_get(r, 0, TWO_FACTOR_STATE_VERIFIED);
    st->verified = v && v[0] == 't';
    st->last_step = db_getll(r, 0, TWO_FACTOR_STATE_LAST_STEP, -1);
    if (st->password)
        offload_run_kind(req, OFFLOAD_PASSWORD, pw_work, pw_on_worked, st);
    else
        st->after_password(req);
}

static void load_state(http_req_t *req)
{
    tf_state_t *st = req->data;
    const char *params[] = {st->user_id};
    db_req_query(req, SQL_TWO_FACTOR_STATE, 1, params, on_state);
}

static void pw_on_taken(bool allowed, int retry_after, bool error, void *data)
{
    http_req_t *req = data;
    if (http_req_gone(req)) goto done;
    if (error) {
        log_warn("password limiter unavailable id=%s", req->id);
    } else if (!allowed) {
        rate_limit_reply(req, "wrong passwords", "for this account", PW_FAIL_POINTS, PW_FAIL_WINDOW,
                         retry_after);
        goto done;
    }
    load_state(req);
done:
    http_req_unref(req);
}

/* Parses {password} (and the issuer of enable), then after(req) once it matched. */
static void with_password(http_req_t *req, bool issuer, http_req_cb after)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    tf_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->password = field_str(req, body, "password", &v, true, 1, 4096, false);
    if (issuer) st->issuer = field_str(req, body, "issuer", &v, false, 1, 100, true);
    if (verr_reply(req, &v)) return;
    caller_t *c = context_caller(req);
    st->user_id = c->user_id;
    st->lang = c->preferred_language;
    st->session_mode = true;
    st->after_password = after;
    req->data = st;
    http_req_ref(req);
    /* The attempt counts now; a right password gives it back (pw_on_worked). */
    ratelimit_hit(pw_fail_key(req, st->user_id), NULL, PW_FAIL_POINTS, PW_FAIL_WINDOW, pw_on_taken,
                  req);
}

/* ---- otpauth URI ---- */

static const char *totp_uri(http_req_t *req, const char *issuer, const char *email,
                            const uint8_t *secret, size_t n)
{
    char b32[(TOTP_SECRET_LEN * 8 + 4) / 5 + 1];
    totp_base32_encode(secret, n, b32);
    const char *is = url_encode(&req->arena, issuer);
    return arena_printf(&req->arena,
                        "otpauth://totp/%s:%s?secret=%s&issuer=%s&algorithm=SHA1&digits=%d&"
                        "period=%d",
                        is, url_encode(&req->arena, email), b32, is, TOTP_DIGITS, TOTP_PERIOD);
}

/* Ten fresh codes into codes[], their hashes as a PostgreSQL text[] literal. */
static const char *new_backup_codes(http_req_t *req, const char *user_id,
                                    char codes[TOTP_BACKUP_CODES][TOTP_BACKUP_CODE_LEN + 1])
{
    buf_t arr = BUF_INIT;
    buf_putc(&arr, '{');
    for (int i = 0; i < TOTP_BACKUP_CODES; i++) {
        uint8_t rnd[TOTP_BACKUP_RANDOM];
        do
            random_bytes(rnd, sizeof rnd);
        while (!totp_backup_code(rnd, codes[i]));
        char h[65];
        totp_backup_hash(tf_backup_key, user_id, codes[i], h);
        if (i) buf_putc(&arr, ',');
        buf_puts(&arr, h);
    }
    buf_putc(&arr, '}');
    const char *lit = arena_strndup(&req->arena, arr.data, arr.len);
    buf_free(&arr);
    return lit;
}

static void put_codes(buf_t *b, char codes[TOTP_BACKUP_CODES][TOTP_BACKUP_CODE_LEN + 1])
{
    buf_puts(b, "\"backupCodes\":[");
    for (int i = 0; i < TOTP_BACKUP_CODES; i++) {
        if (i) buf_putc(b, ',');
        buf_json_str(b, codes[i]);
    }
    buf_putc(b, ']');
}

/* ---- enable ---- */

struct enable_out {
    const char *uri;
    char codes[TOTP_BACKUP_CODES][TOTP_BACKUP_CODE_LEN + 1];
};
typedef struct enable_out enable_out_t;

static void enable_on_saved(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_getll(r, 0, TWO_FACTOR_SETUP_COUNT, 0) != 1) {
        http_reply_error(req, 400, "TOTP_ALREADY_ENABLED", "Two-factor sign-in is already on");
        return;
    }
    enable_out_t *out = ((tf_state_t *)req->data)->out;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"method\":\"totp\",\"totpURI\":");
    buf_json_str(&b, out->uri);
    buf_putc(&b, ',');
    put_codes(&b, out->codes);
    buf_putc(&b, '}');
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void enable_after_password(http_req_t *req)
{
    tf_state_t *st = req->data;
    if (st->verified) {
        http_reply_error(req, 400, "TOTP_ALREADY_ENABLED", "Two-factor sign-in is already on");
        return;
    }
    uint8_t secret[TOTP_SECRET_LEN], nonce[12];
    random_bytes(secret, sizeof secret);
    random_bytes(nonce, sizeof nonce);
    char sealed[TOTP_SEALED_HEX_MAX + 1];
    if (totp_seal(tf_seal_key, nonce, st->user_id, secret, sizeof secret, sealed, sizeof sealed) !=
        0) {
        http_reply_error(req, 500, "INTERNAL", "Could not start two-factor setup");
        return;
    }
    enable_out_t *out = arena_calloc(&req->arena, sizeof(*out));
    out->uri =
        totp_uri(req, st->issuer ? st->issuer : ISSUER_DEFAULT, st->email, secret, sizeof secret);
    memset(secret, 0, sizeof secret);
    const char *hashes = new_backup_codes(req, st->user_id, out->codes);
    st->out = out;
    const char *params[] = {st->user_id, sealed, hashes};
    db_req_query(req, SQL_TWO_FACTOR_SETUP, 3, params, enable_on_saved);
}

static void tf_enable(http_req_t *req)
{
    if (!key_ok_or_reply(req)) return;
    with_password(req, true, enable_after_password);
}

/* ---- get-totp-uri ---- */

static void uri_after_password(http_req_t *req)
{
    tf_state_t *st = req->data;
    if (!st->sealed) {
        http_reply_error(req, 400, "TOTP_NOT_ENABLED",
                         "Two-factor setup has not started: call /api/auth/two-factor/enable");
        return;
    }
    if (st->verified) {
        http_reply_error(req, 400, "TOTP_ALREADY_ENABLED",
                         "Two-factor sign-in is on; its secret is not shown again (disable and "
                         "enable it to set up another authenticator)");
        return;
    }
    uint8_t secret[64];
    int n = totp_open(tf_seal_key, st->user_id, st->sealed, secret, sizeof secret);
    if (n < 0) {
        log_error("two-factor secret of a user does not open with the configured key id=%s",
                  req->id);
        http_reply_error(req, 500, "INTERNAL", "Could not read the two-factor secret");
        return;
    }
    const char *uri = totp_uri(req, ISSUER_DEFAULT, st->email, secret, (size_t)n);
    memset(secret, 0, sizeof secret);
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"totpURI\":");
    buf_json_str(&b, uri);
    buf_putc(&b, '}');
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void tf_get_uri(http_req_t *req)
{
    if (!key_ok_or_reply(req)) return;
    with_password(req, false, uri_after_password);
}

/* ---- disable ---- */

static void clear_trust_cookie(http_req_t *req)
{
    if (http_req_cookie(req, TRUST_COOKIE)) cookie_set(req, TRUST_COOKIE, "", 0);
}

static void disable_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_nrows(r) > 0) outbox_kick();
    clear_trust_cookie(req);
    static const char ok[] = "{\"status\":true}";
    /* The caller rows hold two_factor_enabled (the organization policy reads it). */
    ctx_invalidate_then_reply(req, 'u', ((tf_state_t *)req->data)->user_id, 200, ok,
                              sizeof(ok) - 1);
}

static void disable_after_password(http_req_t *req)
{
    tf_state_t *st = req->data;
    mail_msg_t m = {0};
    mail_render_account_notice(st->lang, MAIL_NOTICE_TWO_FACTOR_DISABLED, &m);
    const char *params[] = {st->user_id, m.subject, m.text, m.html};
    db_req_query(req, SQL_TWO_FACTOR_DISABLE, 4, params, disable_on_done);
    mail_msg_free(&m);
}

static void tf_disable(http_req_t *req)
{
    with_password(req, false, disable_after_password);
}

/* ---- generate-backup-codes ---- */

static void codes_on_saved(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    if (db_getll(r, 0, TWO_FACTOR_BACKUP_REPLACE_COUNT, 0) != 1) {
        http_reply_error(req, 400, "TWO_FACTOR_NOT_ENABLED", "Two-factor sign-in is not on");
        return;
    }
    enable_out_t *out = ((tf_state_t *)req->data)->out;
    buf_t b = BUF_INIT;
    buf_puts(&b, "{\"status\":true,");
    put_codes(&b, out->codes);
    buf_putc(&b, '}');
    http_reply_buf(req, 200, "application/json; charset=utf-8", &b);
}

static void codes_after_password(http_req_t *req)
{
    tf_state_t *st = req->data;
    if (!st->enabled || !st->verified) {
        http_reply_error(req, 400, "TWO_FACTOR_NOT_ENABLED", "Two-factor sign-in is not on");
        return;
    }
    enable_out_t *out = arena_calloc(&req->arena, sizeof(*out));
    const char *hashes = new_backup_codes(req, st->user_id, out->codes);
    st->out = out;
    const char *params[] = {st->user_id, hashes};
    db_req_query(req, SQL_TWO_FACTOR_BACKUP_REPLACE, 2, params, codes_on_saved);
}

static void tf_generate_codes(http_req_t *req)
{
    if (!key_ok_or_reply(req)) return;
    with_password(req, false, codes_after_password);
}

/* ---- verify-totp / verify-backup-code ---- */

static const char *tf_fail_key(http_req_t *req, const char *user_id)
{
    return arena_printf(&req->arena, "rl:2fa-fail:%s", user_id);
}

/* A wrong code: it was counted against the user before the check (verify_limited). */
static void reply_wrong_code(http_req_t *req)
{
    http_reply_error(req, 401, "INVALID_CODE", "Invalid code");
}

/* Any other outcome of a counted attempt (a right code, no setup, a lost challenge): the
 * attempt is given back. */
static void tf_refund(http_req_t *req)
{
    ratelimit_refund(tf_fail_key(req, ((tf_state_t *)req->data)->user_id));
}

static void reply_bad_cookie(http_req_t *req)
{
    if (http_req_cookie(req, TF_COOKIE)) cookie_set(req, TF_COOKIE, "", 0);
    http_reply_error(req, 401, "INVALID_TWO_FACTOR_COOKIE",
                     "No sign-in is waiting for a second step: sign in again");
}

/* Sign-in mode: the challenge ends with a session, in one statement with the code's use. */
static void complete_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    tf_state_t *st = req->data;
    const char *json = db_get(r, 0, TWO_FACTOR_COMPLETE_JSON);
    const char *live = db_get(r, 0, TWO_FACTOR_COMPLETE_LIVE);
    if (!json) {
        if (live && live[0] == 't') {
            reply_wrong_code(req); /* the step was used meanwhile, or no such backup code */
        } else {
            tf_refund(req);
            reply_bad_cookie(req);
        }
        return;
    }
    tf_refund(req);
    if (st->backup) outbox_kick();
    cookie_set_session(req, st->session_token);
    cookie_set(req, TF_COOKIE, "", 0);
    if (st->trust_device) cookie_set(req, TRUST_COOKIE, st->trust_token, TRUST_COOKIE_SECONDS);
    http_reply_jsonn(req, 200, json, db_getlen(r, 0, TWO_FACTOR_COMPLETE_JSON));
}

static void complete_sign_in(http_req_t *req)
{
    tf_state_t *st = req->data;
    char session_id[IDS_UUID_LEN + 1], token_h[TOKEN_HASH_LEN + 1], trust_h[TOKEN_HASH_LEN + 1];
    new_uuid(session_id);
    new_token(st->session_token, token_h);
    if (st->trust_device) new_token(st->trust_token, trust_h);
    char step[24];
    snprintf(step, sizeof step, "%lld", st->step);
    mail_msg_t m = {0};
    if (st->backup) mail_render_account_notice(st->lang, MAIL_NOTICE_BACKUP_CODE_USED, &m);
    const char *params[] = {st->challenge_h,
                            session_id,
                            st->user_id,
                            token_h,
                            req->client_ip,
                            http_req_header(req, "User-Agent"),
                            st->trust_device ? trust_h : NULL,
                            st->backup ? NULL : step,
                            st->backup ? st->backup_h : NULL,
                            m.subject,
                            m.text,
                            m.html,
                            cfg.session_absolute_text};
    db_req_query(req, SQL_TWO_FACTOR_COMPLETE, 13, params, complete_on_done);
    mail_msg_free(&m);
}

static void session_step_on_done(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    tf_state_t *st = req->data;
    if (db_nrows(r) == 0) {
        reply_wrong_code(req);
        return;
    }
    tf_refund(req);
    static const char ok[] = "{\"status\":true}";
    if (!st->backup && db_get(r, 0, TWO_FACTOR_USE_STEP_ENABLED_NOW)[0] == 't') {
        outbox_kick();
        ctx_invalidate_then_reply(req, 'u', st->user_id, 200, ok, sizeof(ok) - 1);
        return;
    }
    if (st->backup) outbox_kick();
    http_reply_json(req, 200, ok);
}

/* The code is checked (TOTP here; a backup code by its hash in the statement), then spent. */
static void verify_code(http_req_t *req)
{
    tf_state_t *st = req->data;
    if (!st->backup) {
        if (!st->sealed) {
            tf_refund(req);
            http_reply_error(req, 400, "TOTP_NOT_ENABLED",
                             "Two-factor setup has not started: call /api/auth/two-factor/enable");
            return;
        }
        uint8_t secret[64];
        int n = totp_open(tf_seal_key, st->user_id, st->sealed, secret, sizeof secret);
        if (n < 0) {
            tf_refund(req);
            log_error("two-factor secret of a user does not open with the configured key id=%s",
                      req->id);
            http_reply_error(req, 500, "INTERNAL", "Could not read the two-factor secret");
            return;
        }
        int64_t step = totp_verify(secret, (size_t)n, st->code, (int64_t)time(NULL), st->last_step);
        memset(secret, 0, sizeof secret);
        if (step < 0) {
            reply_wrong_code(req);
            return;
        }
        st->step = step;
    } else {
        totp_backup_hash(tf_backup_key, st->user_id, st->code, st->backup_h);
    }
    if (!st->session_mode) {
        complete_sign_in(req);
        return;
    }
    mail_msg_t m = {0};
    char step[24];
    snprintf(step, sizeof step, "%lld", st->step);
    if (st->backup) {
        mail_render_account_notice(st->lang, MAIL_NOTICE_BACKUP_CODE_USED, &m);
        const char *params[] = {st->user_id, st->backup_h, m.subject, m.text, m.html};
        db_req_query(req, SQL_TWO_FACTOR_BACKUP_USE, 5, params, session_step_on_done);
    } else {
        mail_render_account_notice(st->lang, MAIL_NOTICE_TWO_FACTOR_ENABLED, &m);
        const char *params[] = {st->user_id, step, m.subject, m.text, m.html};
        db_req_query(req, SQL_TWO_FACTOR_USE_STEP, 5, params, session_step_on_done);
    }
    mail_msg_free(&m);
}

static void fail_on_taken(bool allowed, int retry_after, bool error, void *data)
{
    http_req_t *req = data;
    if (http_req_gone(req)) goto done;
    if (error) {
        log_warn("two-factor limiter unavailable id=%s", req->id);
    } else if (!allowed) {
        rate_limit_reply(req, "wrong two-factor codes", "for this account", TF_FAIL_POINTS,
                         TF_FAIL_WINDOW, retry_after);
        goto done;
    }
    verify_code(req);
done:
    http_req_unref(req);
}

/* After the auth limiter (per IP and per user): the wrong-code limit of the user, counting
 * this attempt now (a right code gives it back: tf_refund). */
static void verify_limited(http_req_t *req)
{
    tf_state_t *st = req->data;
    http_req_ref(req);
    ratelimit_hit(tf_fail_key(req, st->user_id), NULL, TF_FAIL_POINTS, TF_FAIL_WINDOW,
                  fail_on_taken, req);
}

static void verify_after_state(http_req_t *req)
{
    tf_state_t *st = req->data;
    auth_limit_then(req, "two-factor", st->user_id, verify_limited);
}

static void on_challenge(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    tf_state_t *st = req->data;
    if (db_nrows(r) != 1) {
        reply_bad_cookie(req);
        return;
    }
    st->user_id = arena_strdup(&req->arena, db_get(r, 0, TWO_FACTOR_CHALLENGE_GET_USER_ID));
    st->email = arena_strdup(&req->arena, db_get(r, 0, TWO_FACTOR_CHALLENGE_GET_EMAIL));
    const char *lang = db_get(r, 0, TWO_FACTOR_CHALLENGE_GET_PREFERRED_LANGUAGE);
    st->lang = lang ? arena_strdup(&req->arena, lang) : NULL;
    const char *s = db_get(r, 0, TWO_FACTOR_CHALLENGE_GET_SECRET_SEALED);
    st->sealed = s ? arena_strdup(&req->arena, s) : NULL;
    const char *v = db_get(r, 0, TWO_FACTOR_CHALLENGE_GET_VERIFIED);
    st->verified = v && v[0] == 't';
    st->last_step = db_getll(r, 0, TWO_FACTOR_CHALLENGE_GET_LAST_STEP, -1);
    st->enabled = true;
    verify_after_state(req);
}

static void tf_verify(http_req_t *req, bool backup)
{
    json_t *body;
    if (!json_body_ok_or_reply(req, &body)) return;
    verr_t v = {0};
    tf_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->backup = backup;
    st->code = field_str(req, body, "code", &v, true, 1, 64, true);
    json_t *td = json_object_get(body, "trustDevice");
    if (td && !json_is_boolean(td) && !json_is_null(td))
        verr_add(&v, "trustDevice", "must be a boolean");
    st->trust_device = td && json_is_true(td);
    json_t *ds = json_object_get(body, "disableSession");
    if (backup && ds && !json_is_boolean(ds) && !json_is_null(ds))
        verr_add(&v, "disableSession", "must be a boolean");
    if (verr_reply(req, &v)) return;
    if (!key_ok_or_reply(req)) return;
    req->data = st;
    caller_t *c = context_caller(req);
    if (c) {
        st->session_mode = true;
        st->user_id = c->user_id;
        st->lang = c->preferred_language;
        st->after_password = verify_after_state;
        load_state(req);
        return;
    }
    const char *cookie = http_req_cookie(req, TF_COOKIE);
    if (!cookie || !token_is_wellformed(cookie)) {
        reply_bad_cookie(req);
        return;
    }
    token_hash(cookie, st->challenge_h);
    const char *params[] = {st->challenge_h};
    db_req_query(req, SQL_TWO_FACTOR_CHALLENGE_GET, 1, params, on_challenge);
}

static void tf_verify_totp(http_req_t *req)
{
    tf_verify(req, false);
}

static void tf_verify_backup(http_req_t *req)
{
    tf_verify(req, true);
}

/* ---- the sign-in step (routes/auth.c) ---- */

static void challenge_reply(http_req_t *req)
{
    http_reply_json(req, 200, "{\"twoFactorRedirect\":true,\"twoFactorMethods\":[\"totp\"]}");
}

/* The challenge is stored; the session whose cookie the request carried, if any, has ended. */
static void challenge_on_saved(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    tf_state_t *st = req->data;
    cookie_set(req, TF_COOKIE, st->session_token, TF_COOKIE_SECONDS);
    const char *ended = db_get(r, 0, TWO_FACTOR_CHALLENGE_NEW_ENDED_ID);
    if (ended) {
        /* The client held another session's cookie: it ends (streams, cached contexts) and the
         * cookie goes, so the second step runs as a sign-in, not as that session. */
        cookie_clear_session(req);
        auth_end_session_then(
            req, arena_strdup(&req->arena, ended),
            arena_strdup(&req->arena, db_get(r, 0, TWO_FACTOR_CHALLENGE_NEW_ENDED_USER_ID)),
            challenge_reply);
        return;
    }
    challenge_reply(req);
}

static void new_challenge(http_req_t *req)
{
    tf_state_t *st = req->data;
    char h[TOKEN_HASH_LEN + 1];
    new_token(st->session_token, h);
    const char *params[] = {h, st->user_id, auth_presented_session_hash(req)};
    db_req_query(req, SQL_TWO_FACTOR_CHALLENGE_NEW, 3, params, challenge_on_saved);
}

static void on_trusted(http_req_t *req, db_result_t *r)
{
    if (!db_ok_or_reply(req, r)) return;
    tf_state_t *st = req->data;
    const char *t = db_get(r, 0, TWO_FACTOR_TRUSTED_TRUSTED);
    if (t && t[0] == 't') {
        req->data = st->sign_in_data;
        st->sign_in_next(req);
        return;
    }
    clear_trust_cookie(req);
    new_challenge(req);
}

void two_factor_sign_in(http_req_t *req, const char *user_id, http_req_cb next)
{
    tf_state_t *st = arena_calloc(&req->arena, sizeof(*st));
    st->user_id = arena_strdup(&req->arena, user_id);
    st->sign_in_next = next;
    st->sign_in_data = req->data;
    req->data = st;
    const char *trust = http_req_cookie(req, TRUST_COOKIE);
    if (trust && token_is_wellformed(trust)) {
        char h[TOKEN_HASH_LEN + 1];
        token_hash(trust, h);
        const char *params[] = {h, st->user_id};
        db_req_query(req, SQL_TWO_FACTOR_TRUSTED, 2, params, on_trusted);
        return;
    }
    new_challenge(req);
}

static const route_t two_factor_routes[] = {
    {HTTP_M_POST, "/api/auth/two-factor/enable", tf_enable, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/two-factor/get-totp-uri", tf_get_uri, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/two-factor/verify-totp", tf_verify_totp, AUTH_OPTIONAL, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/two-factor/verify-backup-code", tf_verify_backup, AUTH_OPTIONAL,
     ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/two-factor/disable", tf_disable, AUTH_SESSION, ROLE_NONE,
     ROUTE_GATE_EXEMPT, 0},
    {HTTP_M_POST, "/api/auth/two-factor/generate-backup-codes", tf_generate_codes, AUTH_SESSION,
     ROLE_NONE, ROUTE_GATE_EXEMPT, 0},
};

void routes_two_factor_register(void)
{
    keys_derive();
    router_add(two_factor_routes, sizeof(two_factor_routes) / sizeof(two_factor_routes[0]));
}

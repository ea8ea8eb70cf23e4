/*
 * Outbox drainer: claims due rows of the `outbox` table with a lease, sends them (rt/mail,
 * rt/push over libcurl multi) and records the outcome. See rt/outbox.h for the row format.
 *
 * One claim statement at a time per worker, asking for at most as many rows as there are free
 * send slots (OUTBOX_MAX_INFLIGHT), so a claimed row is sent at once and never waits out its
 * lease in a local queue. The claim sets next_attempt_at two minutes ahead: if this worker dies
 * mid-send, the row becomes due again for any worker. A row whose send succeeded gets sent_at;
 * a failed one gets last_error and next_attempt_at = now + 5 s * 2^attempts (at most 1 h);
 * after 10 attempts it is left alone (a dead letter to inspect by hand). A row whose payload
 * cannot be sent at all (malformed) is marked dead at once. A mail row that is sent or given up
 * loses its body (text, html), which may carry a live link; rt/janitor.c deletes old rows.
 *
 * Push rows with more than PUSH_BATCH_MAX tokens are sent as several batches; when only some
 * batches fail, the retry keeps just the tokens of the failed batches, so devices that got the
 * notification do not get it twice. Tokens reported DeviceNotRegistered are deleted from
 * push_tokens (a table of a later migration: undefined_table is ignored).
 *
 * Rows of kind 'storage_delete' ({"key": "..."}) delete a stored object whose last reference a
 * committed transaction removed (rt/storage.h); a missing object counts as deleted.
 */
#include "rt/outbox.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/log.h"
#include "core/mem.h"
#include "db/db.h"
#include "db/q_outbox.h"
#include "domain/crypto.h"
#include "rt/mail.h"
#include "rt/push.h"
#include "rt/storage.h"

#define OUTBOX_TICK_MS 1000
#define OUTBOX_CLAIM_MAX 50
#define OUTBOX_MAX_INFLIGHT 16
#define OUTBOX_BACKOFF_BASE_S 5
#define OUTBOX_BACKOFF_MAX_S 3600

enum { JOB_MAIL, JOB_PUSH, JOB_STORAGE_DELETE };

typedef struct ob_job {
    char id[24];
    int kind;
    int attempts; /* after the claim's increment */
    json_t *payload;
    /* push */
    const char **tokens; /* into payload */
    int ntokens;
    int parts_left;
    json_t *failed_tokens; /* tokens of failed batches */
    int sent_batches;
    char *error;
} ob_job_t;

typedef struct ob_batch {
    ob_job_t *job;
    int off, n;
} ob_batch_t;

static struct {
    uv_loop_t *loop;
    uv_timer_t tick;
    uv_timer_t kick;
    bool running;
    bool claiming;
    bool more; /* the last claim came back full: claim again as slots free up */
    int in_flight;
    int claim_limit;
} O;

static void on_tick(uv_timer_t *t);
static void claim(void);
static void on_claimed(db_result_t *r, void *data);
static void job_start(ob_job_t *j);
static void job_free(ob_job_t *j);
static void job_finish(ob_job_t *j, const char *error, bool permanent);
static void on_updated(db_result_t *r, void *data);
static void on_mail_done(const char *error, void *data);
static void on_storage_deleted(int rc, void *data);
static void push_start(ob_job_t *j);
static void on_push_done(const push_result_t *r, void *data);
static void on_token_deleted(db_result_t *r, void *data);
static int backoff_seconds(int attempts);
static void on_kick(uv_timer_t *t);
static const char *str_field(json_t *obj, const char *key);

int outbox_init(uv_loop_t *loop)
{
    if (O.running) return 0;
    memset(&O, 0, sizeof(O));
    O.loop = loop;
    uv_timer_init(loop, &O.tick);
    uv_timer_init(loop, &O.kick);
    uv_timer_start(&O.tick, on_tick, OUTBOX_TICK_MS, OUTBOX_TICK_MS);
    O.running = true;
    return 0;
}

/* Stops claiming. Sends in flight still record their outcome when the database is there;
 * rows claimed but never sent come back when their lease ends. */
void outbox_shutdown(void)
{
    if (!O.running) return;
    O.running = false;
    uv_close((uv_handle_t *)&O.tick, NULL);
    uv_close((uv_handle_t *)&O.kick, NULL);
}

static void on_kick(uv_timer_t *t)
{
    (void)t;
    claim();
}

void outbox_kick(void)
{
    if (!O.running) return;
    /* From the loop, never inside the caller's stack (it may be in a db callback). */
    uv_timer_start(&O.kick, on_kick, 0, 0);
}

static void on_tick(uv_timer_t *t)
{
    (void)t;
    claim();
}

static int backoff_seconds(int attempts)
{
    long long s = OUTBOX_BACKOFF_BASE_S;
    int i;

    for (i = 0; i < attempts && s < OUTBOX_BACKOFF_MAX_S; i++)
        s *= 2;
    return s > OUTBOX_BACKOFF_MAX_S ? OUTBOX_BACKOFF_MAX_S : (int)s;
}

static void claim(void)
{
    int room = OUTBOX_MAX_INFLIGHT - O.in_flight;
    char limit[16];
    const char *params[1] = {limit};

    if (!O.running || O.claiming || room <= 0) return;
    O.claiming = true;
    O.more = false;
    O.claim_limit = room < OUTBOX_CLAIM_MAX ? room : OUTBOX_CLAIM_MAX;
    snprintf(limit, sizeof(limit), "%d", O.claim_limit);
    db_query(SQL_OUTBOX_CLAIM, 1, params, on_claimed, NULL);
}

static void on_claimed(db_result_t *r, void *data)
{
    int n, i;

    (void)data;
    O.claiming = false;
    if (!r->ok) {
        if (r->conn_lost)
            log_debug("outbox: database unavailable");
        else
            log_warn("outbox: claim failed: %s", r->error ? r->error : "?");
        return;
    }
    n = db_nrows(r);
    if (!O.running) {
        if (n > 0) log_info("outbox: stopping, %d claimed rows come back after their lease", n);
        return;
    }
    for (i = 0; i < n; i++) {
        ob_job_t *j = xcalloc(1, sizeof(*j));
        const char *kind = db_get(r, i, OUTBOX_CLAIM_KIND);
        const char *payload = db_get(r, i, OUTBOX_CLAIM_PAYLOAD);
        const char *id = db_get(r, i, OUTBOX_CLAIM_ID);
        json_error_t jerr;

        snprintf(j->id, sizeof(j->id), "%s", id ? id : "0");
        j->attempts = (int)db_getll(r, i, OUTBOX_CLAIM_ATTEMPTS, 1);
        j->kind = kind && strcmp(kind, "push") == 0             ? JOB_PUSH
                  : kind && strcmp(kind, "storage_delete") == 0 ? JOB_STORAGE_DELETE
                                                                : JOB_MAIL;
        j->payload = payload ? json_loads(payload, 0, &jerr) : NULL;
        O.in_flight++;
        job_start(j);
    }
    if (n >= O.claim_limit) O.more = true;
    if (O.more && O.in_flight < OUTBOX_MAX_INFLIGHT) outbox_kick();
}

static void job_free(ob_job_t *j)
{
    json_decref(j->payload);
    json_decref(j->failed_tokens);
    free(j->tokens);
    free(j->error);
    free(j);
}

static const char *str_field(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

/* 32 hex digits of SHA-256(row id, text): the text carries the mail's own token or link, so
 * rows of different databases do not share one. */
static const char *outbox_message_id(const char *id, const char *text, char out[33])
{
    buf_t b = BUF_INIT;
    buf_puts(&b, id);
    buf_putc(&b, '\n');
    buf_puts(&b, text);
    char hex[CRYPTO_SHA256_HEX_LEN + 1];
    crypto_sha256_hex(b.data, b.len, hex);
    buf_free(&b);
    memcpy(out, hex, 32);
    out[32] = '\0';
    return out;
}

static void job_start(ob_job_t *j)
{
    if (!json_is_object(j->payload)) {
        job_finish(j, "payload is not a JSON object", true);
        return;
    }
    if (j->kind == JOB_STORAGE_DELETE) {
        const char *key = str_field(j->payload, "key");
        if (!key || !storage_key_valid(key)) {
            job_finish(j, "storage_delete payload needs a valid key", true);
            return;
        }
        storage_delete(key, on_storage_deleted, j);
        return;
    }
    if (j->kind == JOB_MAIL) {
        mail_envelope_t m;
        char mid[33];

        m.to = str_field(j->payload, "to");
        m.subject = str_field(j->payload, "subject");
        m.text = str_field(j->payload, "text");
        m.html = str_field(j->payload, "html");
        m.ics = str_field(j->payload, "ics");
        m.ics_method = str_field(j->payload, "icsMethod");
        if (!m.to || !m.subject || !m.text) {
            job_finish(j, "mail payload needs to, subject and text", true);
            return;
        }
        /* Stable across retries of this row: SMTP acceptance and the "sent" mark cannot be
         * one step, so a worker killed between them sends the mail again after the lease;
         * the same Message-ID lets receivers drop the copy (docs/reliability.md). */
        m.message_id = outbox_message_id(j->id, m.text, mid);
        mail_send(&m, on_mail_done, j);
        return;
    }
    push_start(j);
}

/* A stored object whose last reference went away (rt/storage.h); a missing object is done. */
static void on_storage_deleted(int rc, void *data)
{
    ob_job_t *j = data;

    if (rc != 0) log_warn("outbox: storage delete %s (attempt %d) failed", j->id, j->attempts);
    job_finish(j, rc != 0 ? "storage delete failed" : NULL, false);
}

static void on_mail_done(const char *error, void *data)
{
    ob_job_t *j = data;

    if (error) log_warn("outbox: mail %s (attempt %d): %s", j->id, j->attempts, error);
    job_finish(j, error, false);
}

static void push_start(ob_job_t *j)
{
    json_t *to = json_object_get(j->payload, "to");
    push_msg_t msg;
    size_t i;
    int off;

    if (json_is_string(to)) { /* a single token is accepted too */
        json_t *arr = json_array();

        json_array_append(arr, to);
        json_object_set_new(j->payload, "to", arr);
        to = arr;
    }
    if (!json_is_array(to)) {
        job_finish(j, "push payload needs a to array", true);
        return;
    }
    j->tokens = xcalloc(json_array_size(to) + 1, sizeof(char *));
    for (i = 0; i < json_array_size(to); i++) {
        const char *t = json_string_value(json_array_get(to, i));

        if (t && *t) j->tokens[j->ntokens++] = t;
    }
    if (j->ntokens == 0) {
        job_finish(j, NULL, false);
        return;
    }
    msg.title = str_field(j->payload, "title");
    msg.body = str_field(j->payload, "body");
    msg.data = json_object_get(j->payload, "data");
    j->parts_left = (j->ntokens + PUSH_BATCH_MAX - 1) / PUSH_BATCH_MAX;
    for (off = 0; off < j->ntokens; off += PUSH_BATCH_MAX) {
        ob_batch_t *b = xcalloc(1, sizeof(*b));

        b->job = j;
        b->off = off;
        b->n = j->ntokens - off < PUSH_BATCH_MAX ? j->ntokens - off : PUSH_BATCH_MAX;
        push_send(j->tokens + off, b->n, &msg, on_push_done, b);
    }
}

static void on_push_done(const push_result_t *r, void *data)
{
    ob_batch_t *b = data;
    ob_job_t *j = b->job;
    int i;

    for (i = 0; i < r->n_unregistered; i++) {
        const char *params[1] = {r->unregistered[i]};

        log_info("outbox: forgetting unregistered push token");
        db_query(SQL_OUTBOX_FORGET_TOKEN, 1, params, on_token_deleted, NULL);
    }
    if (r->ok) {
        j->sent_batches++;
    } else {
        log_warn("outbox: push %s batch of %d (attempt %d): %s", j->id, b->n, j->attempts,
                 r->error ? r->error : "failed");
        if (!j->failed_tokens) j->failed_tokens = json_array();
        for (i = 0; i < b->n; i++)
            json_array_append_new(j->failed_tokens, json_string(j->tokens[b->off + i]));
        if (!j->error) j->error = xstrdup(r->error ? r->error : "push failed");
    }
    free(b);
    if (--j->parts_left > 0) return;
    job_finish(j, j->error, false);
}

static void on_token_deleted(db_result_t *r, void *data)
{
    (void)data;
    /* 42P01 undefined_table: push_tokens arrives with a later migration */
    if (!r->ok && !(r->sqlstate && strcmp(r->sqlstate, "42P01") == 0))
        log_warn("outbox: deleting a push token failed: %s", r->error ? r->error : "?");
}

/* Records the outcome of one row: sent, retry later, or dead (permanent). */
static void job_finish(ob_job_t *j, const char *error, bool permanent)
{
    char secs[16];

    if (!error) {
        const char *params[1] = {j->id};

        db_query(SQL_OUTBOX_SENT, 1, params, on_updated, j);
        return;
    }
    if (permanent) {
        const char *params[2] = {j->id, error};

        log_warn("outbox: row %s cannot be sent: %s", j->id, error);
        db_query(SQL_OUTBOX_DEAD, 2, params, on_updated, j);
        return;
    }
    snprintf(secs, sizeof(secs), "%d", backoff_seconds(j->attempts));
    if (j->failed_tokens && j->sent_batches > 0) {
        char *tokens = json_dumps(j->failed_tokens, JSON_COMPACT);
        const char *params[4] = {j->id, error, secs, tokens};

        db_query(SQL_OUTBOX_RETRY_TOKENS, 4, params, on_updated, j);
        free(tokens);
        return;
    }
    {
        const char *params[3] = {j->id, error, secs};

        db_query(SQL_OUTBOX_RETRY, 3, params, on_updated, j);
    }
}

static void on_updated(db_result_t *r, void *data)
{
    ob_job_t *j = data;

    if (!r->ok)
        log_warn("outbox: recording the outcome of row %s failed: %s", j->id,
                 r->error ? r->error : "?");
    job_free(j);
    O.in_flight--;
    if (O.more) outbox_kick();
}

/*
 * Caller-context cache: each worker keeps the row that the router guard's caller query returned
 * (session, user status and roles, profile, active organization and membership, invite gate),
 * keyed by session-token hash and X-Organization-Id, so a request with a known session needs no
 * database round trip before its handler.
 *
 * Staleness is bounded three ways:
 *  - Every write that changes what the row holds calls ctx_invalidate_* after its commit. That
 *    drops the matching entries of this worker at once and PUBLISHes the key on one Redis
 *    channel (CTX_CHANNEL), so every worker of every host drops them too.
 *  - The cache is used only while that channel is subscribed on a live connection; when the
 *    subscriber connection is lost the cache is emptied and stays off until the subscription is
 *    back (messages published meanwhile are lost).
 *  - Entries live at most CONTEXT_CACHE_TTL_MS (default 5 s), which bounds what a lost message
 *    or a change made outside the API (a manual UPDATE, an invite reaching its expiry) could
 *    cost; session expiry itself is checked on every hit.
 * A lookup that misses remembers the invalidation generation; its result is stored only if no
 * invalidation arrived while the query ran, so a row read before a write's commit is never kept
 * after the write's invalidation.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#include "core/http.h"
#include "db/q_context.h"

#define CTX_CHANNEL "coachd:ctx-invalidate"
/* The caller row: the columns of SQL_CONTEXT_CALLER (db/queries/context.sql), read with its
 * CONTEXT_CALLER_* enum. */
typedef struct ctx_row {
    const char *v[CONTEXT_CALLER_NCOLS]; /* NULL for SQL NULL */
    int len[CONTEXT_CALLER_NCOLS];
} ctx_row_t;

void ctx_cache_init(void);
/* The generation to pass to ctx_cache_put for a lookup starting now. */
unsigned ctx_cache_gen(void);
/* A fresh entry for (token hash, organization header or NULL): fills `out` with pointers that
 * stay valid until the next call into this module. */
bool ctx_cache_get(const char *hash, const char *org, ctx_row_t *out);
/* Stores a row read by a lookup that started at generation `gen`. */
void ctx_cache_put(const char *hash, const char *org, unsigned gen, const ctx_row_t *row);
/* Forgets this worker's entries of one session (after its sliding refresh moved the expiry). */
void ctx_cache_drop_session_local(const char *session_id);

/* After commit: on every worker and host, drop the contexts of a session, of every session of a
 * user, of the user with this email (invites are addressed by email), or of every caller whose
 * active or current organization is org_id. NULL or empty ids are ignored. */
void ctx_invalidate_session(const char *session_id);
/* Like ctx_invalidate_session, then done(req) once Redis has acknowledged the PUBLISH (and so has
 * handed the message to every subscriber), or failed: a reply sent from done() cannot overtake
 * the invalidation to another worker. done is skipped when the client has gone. */
void ctx_invalidate_session_then(http_req_t *req, const char *session_id,
                                 void (*done)(http_req_t *req));
/* Invalidates ('s' session, 'u' user, 'e' email, 'o' organization) and replies `json` with
 * `status` once Redis has acknowledged the PUBLISH; json (copied) NULL replies 500. */
void ctx_invalidate_then_reply(http_req_t *req, char kind, const char *value, int status,
                               const char *json, size_t len);
void ctx_invalidate_user(const char *user_id);
void ctx_invalidate_email(const char *email);
void ctx_invalidate_org(const char *org_id);

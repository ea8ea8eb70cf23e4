/*
 * The bridge from a request to the rules of domain/permissions.h: the caller as the rules see it,
 * and the reply of a refusal. A handler gathers the facts, asks the rule, and goes on only when
 * perm_allowed_or_replied() returns true.
 */
#pragma once
#include <stdbool.h>

#include "core/http.h"
#include "domain/permissions.h"
#include "routes/context.h"
#include "routes/txreq.h"

static inline perm_actor_t perm_actor(const caller_t *c)
{
    return (perm_actor_t){c->user_id, c->global_role, c->org_role, c->org_id};
}

/* Room for perm_message(): the longest refusal names two participants, a role and an action. */
#define PERM_MESSAGE_MAX 256

/* True when p allows; otherwise replies p's status, code and message (perm_message(): a role
 * refusal names who may) and returns false. */
static inline bool perm_allowed_or_replied(http_req_t *req, perm_t p)
{
    if (perm_allowed(p)) return true;
    char buf[PERM_MESSAGE_MAX];
    http_reply_error(req, p.status, p.code, perm_message(p, buf, sizeof buf));
    return false;
}

/* As perm_allowed_or_replied() inside a transaction: a refusal rolls it back and replies. */
static inline bool perm_allowed_or_rolled_back(txreq_t *tx, perm_t p)
{
    if (perm_allowed(p)) return true;
    char buf[PERM_MESSAGE_MAX];
    txreq_error(tx, p.status, p.code, perm_message(p, buf, sizeof buf));
    return false;
}

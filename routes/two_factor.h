/*
 * Two-factor sign-in (routes/two_factor.c): the step routes/auth.c hands a sign-in to once the
 * password matched and the user has two-factor on.
 */
#pragma once
#include "core/http.h"

/* A trusted device of this user (the auth.trust_device cookie) goes on with next(req) as a
 * normal sign-in, req->data restored; otherwise answers 200 {"twoFactorRedirect": true, ...}
 * with the 10-minute auth.two_factor cookie of a new challenge, and no session. */
void two_factor_sign_in(http_req_t *req, const char *user_id, http_req_cb next);

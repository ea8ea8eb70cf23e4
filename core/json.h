/* JSON request bodies (jansson). Responses are rendered with buf_json_* or by PostgreSQL. */
#pragma once
#include <jansson.h>
#include <stdbool.h>

#include "core/http.h"

/* Parses req->body as a JSON object (an absent or empty body counts as {}) into *body and
 * returns true. On failure replies 400 VALIDATION_ERROR and returns false. The object is
 * released when the request is freed. */
bool json_body_ok_or_reply(http_req_t *req, json_t **body);
/* Field helpers: NULL when absent, JSON null, or of another type. */
const char *json_get_str(const json_t *obj, const char *key);
/* True when the key exists (any type, null included). */
int json_has(const json_t *obj, const char *key);

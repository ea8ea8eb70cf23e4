/* JSON request bodies (jansson). Responses are rendered with buf_json_* or by PostgreSQL. */
#pragma once
#include <jansson.h>

#include "core/http.h"

/* Parses req->body as a JSON object (an absent or empty body counts as {}). On failure replies
 * 400 VALIDATION_ERROR and returns NULL. The object is released when the request is freed. */
json_t *json_body_or_reply(http_req_t *req);
/* Field helpers: NULL when absent, JSON null, or of another type. */
const char *json_get_str(const json_t *obj, const char *key);
/* True when the key exists (any type, null included). */
int json_has(const json_t *obj, const char *key);

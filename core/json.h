/* JSON request bodies (jansson). Responses are rendered with buf_json_* or by PostgreSQL. */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/http.h"

/* Compact JSON text: every answer is sent without white space outside strings, whoever wrote
 * it (PostgreSQL's json_build_object writes "a" : 1, json_agg ", " and line breaks, jsonb::text
 * ": " and ", "). These work on any text, valid JSON or not: they never look inside strings. */
/* Offset of the first space, tab, CR or LF outside strings in s[0..n); n when there is none. */
size_t json_space_at(const char *s, size_t n);
/* Copies s[0..n) to dst without that white space and returns the length written (at most n;
 * no NUL is added). dst may be s. */
size_t json_compact(char *dst, const char *s, size_t n);
/* Appends s[0..n), compacted, to b. */
void buf_json_compact(buf_t *b, const char *s, size_t n);

/* Parses req->body as a JSON object (an absent or empty body counts as {}) into *body and
 * returns true. On failure replies 400 VALIDATION_ERROR and returns false. The object is
 * released when the request is freed. */
bool json_body_ok_or_reply(http_req_t *req, json_t **body);
/* Field helpers: NULL when absent, JSON null, or of another type. */
const char *json_get_str(const json_t *obj, const char *key);
/* True when the key exists (any type, null included). */
int json_has(const json_t *obj, const char *key);

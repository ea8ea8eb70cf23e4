/*
 * Stored files shown as fresh presigned URLs in JSON text: the one rewrite of answers (the body
 * filter of core/http.c, installed by routes.c) and of chat's answers and events.
 *
 * Two things are rendered:
 *   - a string that is a signed storage reference ("storage:<mime>:<key>:<tag>", rt/storage.h:
 *     avatars and logos, kept in users.avatar_url / organizations.logo_url) becomes its URL;
 *     any other string, a forged reference included, is left as it is;
 *   - with FILE_URLS_KEYS, a member "_key": <storage key> (chat attachments,
 *     chat_attachments_json in db/) becomes "url": <URL for the object's filename and mimeType>,
 *     in its place, or "url": null when storage cannot sign or the file is gone.
 * The text works on JSON as it is written (PostgreSQL's or the handlers', white space or not):
 * nothing but the rendered tokens changes, so identical data gives identical bytes whether it
 * held a file or not. URLs live STORAGE_URL_TTL.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "core/http.h"

enum { FILE_URLS_REFS = 1, FILE_URLS_KEYS = 2 };

/* Whether json holds something that file_urls_render with `what` would look at. */
bool file_urls_needed(const char *json, size_t len, int what);
/* json with what `what` names rendered: json itself when nothing changed, else text in req's
 * arena (NUL-terminated); its length in *out_len. */
const char *file_urls_render(http_req_t *req, const char *json, size_t len, int what,
                             size_t *out_len);
/* The body filter of core/http.c (http_body_filter_fn): storage references only, since any
 * answer may carry a client's JSON, where "_key" means nothing to the server. */
const char *file_urls_body_filter(http_req_t *req, const char *body, size_t len, size_t *out_len);

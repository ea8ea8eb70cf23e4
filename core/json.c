/* Request-body JSON parsing with the error replies of docs/api.md. */
#include "core/json.h"

#include <string.h>

static void json_release(void *p)
{
    json_decref((json_t *)p);
}

bool json_body_ok_or_reply(http_req_t *req, json_t **body)
{
    *body = NULL;
    json_t *root;
    if (!req->body || req->body_len == 0) {
        root = json_object();
    } else {
        json_error_t err;
        /* Reject NUL bytes and duplicate keys: either usually means a confused client. */
        root = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &err);
        if (!root) {
            http_reply_error(req, 400, "VALIDATION_ERROR", "Malformed JSON body");
            return false;
        }
    }
    arena_on_free(&req->arena, json_release, root);
    if (!json_is_object(root)) {
        http_reply_error(req, 400, "VALIDATION_ERROR", "Request body must be a JSON object");
        return false;
    }
    *body = root;
    return true;
}

const char *json_get_str(const json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int json_has(const json_t *obj, const char *key)
{
    return json_object_get(obj, key) != NULL;
}

/*
 * Push notifications through an Expo-compatible endpoint (cfg.push_url, Expo's public endpoint
 * by default) over libcurl multi. One call sends one batch: a JSON array of at most
 * PUSH_BATCH_MAX messages {to, title, body, data, sound: "default"}, one message per device
 * token, with accept/content-type application/json and, when cfg.push_access_token is set,
 * Authorization: Bearer. The response tickets are matched to the tokens by position; tokens
 * whose ticket says DeviceNotRegistered are reported back so the caller can forget them.
 *
 * In development without PUSH_URL (cfg.push_url NULL, !cfg.production), each batch is written
 * instead as one file under cfg.push_dir (PUSH_DIR, .local/push): the exact JSON array a POST
 * would carry, named <unix ms>-<random>.json, written to a hidden temporary name and renamed, with
 * uv_fs_* calls (never blocking the loop). Such a batch counts as accepted, with no tickets. A
 * folder removed while the server runs is made again (in the thread pool); a failed write is a
 * retryable failure and leaves no file.
 *
 * Callers are normally rt/outbox.c; routes queue push through the outbox table.
 */
#pragma once
#include <jansson.h>
#include <stdbool.h>
#include <uv.h>

#define PUSH_BATCH_MAX 100
#define PUSH_DEFAULT_URL "https://exp.host/--/api/v2/push/send"
#define PUSH_DEFAULT_DIR ".local/push"

typedef struct push_msg {
    const char *title; /* may be NULL */
    const char *body;  /* may be NULL */
    json_t *data;      /* JSON object or NULL; borrowed, copied into the request */
} push_msg_t;

typedef struct push_result {
    bool ok;           /* HTTP 2xx with a ticket array: the batch was accepted */
    bool retryable;    /* failure worth retrying: network error, timeout, HTTP 429 or 5xx */
    long http_status;  /* 0 when no response arrived */
    const char *error; /* NULL when ok; text for logs */
    /* Tokens with a DeviceNotRegistered ticket (pointers into the caller's token array). */
    const char **unregistered;
    int n_unregistered;
    int n_ticket_errors; /* error tickets of any kind, DeviceNotRegistered included */
} push_result_t;

/* The result and everything it points to are valid during the callback only. */
typedef void (*push_done_cb)(const push_result_t *r, void *data);

/* Creates cfg.push_dir when batches go to files (synchronous: call before the loop runs).
 * Returns 0 or -1 (logged). */
int push_init(uv_loop_t *loop);
/* Later file batches fail ("not running"); writes under way finish. */
void push_shutdown(void);

/* Sends msg to tokens[0..n) (1 <= n <= PUSH_BATCH_MAX; more is a caller bug and fails).
 * tokens must stay valid until cb fires; everything else is copied. cb fires exactly once,
 * from the loop. Needs curlm_init() first, and push_init() for the file sink. */
void push_send(const char *const *tokens, int n, const push_msg_t *msg, push_done_cb cb,
               void *data);

/* Parses an Expo response body against the n tokens that were sent (exposed for tests). Fills
 * r (r->unregistered is a heap array the caller frees) and returns 0, or -1 when the body is
 * not a ticket response. */
int push_parse_tickets(const char *body, size_t len, const char *const *tokens, int n,
                       push_result_t *r);

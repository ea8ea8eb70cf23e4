/*
 * The janitor: a timer on the loop that every JANITOR_INTERVAL_SECONDS (default 300) deletes
 * what no longer serves anyone and would only help an intruder who reads the database:
 *   - outbox rows sent more than JANITOR_OUTBOX_KEEP ago (their mail bodies, which carry reset,
 *     verification and invite links, are already removed when sent: rt/outbox.c), and dead rows
 *     after 30 days;
 *   - sessions past their expiry;
 *   - verification tokens used or expired more than a day ago (the day keeps the "expired" answer
 *     of a late link distinct from "invalid").
 * Each run is one statement with bounded batches; it runs in every worker (DELETE is idempotent).
 * A failed run is logged and retried at the next tick.
 *
 * A second timer, every STORAGE_JANITOR_INTERVAL_SECONDS (default 3600), forgets keys presigned
 * more than 24 hours ago that no upload registered and queues the deletion of their objects in
 * the outbox (storage_delete rows, sent by rt/outbox.c through rt/storage.c), and sweeps
 * orphaned temporary upload files (storage_sweep_tmp).
 */
#pragma once
#include <uv.h>

/* Starts the timer (first run a few seconds after start). 0 or a negative uv error. */
int janitor_init(uv_loop_t *loop);
/* Stops the timer and closes its handle; a run in flight finishes and its result is dropped. */
void janitor_shutdown(void);

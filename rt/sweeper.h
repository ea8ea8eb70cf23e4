/*
 * The missed-session sweeper (docs/api.md): a timer on the loop that every
 * SWEEPER_INTERVAL_SECONDS (default 60) moves scheduled and confirmed sessions whose end lies
 * more than 30 minutes in the past to `missed`, in one statement, and publishes session-update
 * once for each mentorship touched. Runs in every worker; the UPDATE's row locks make a session
 * move once. A run that fails (database down) is logged and retried at the next tick.
 */
#pragma once
#include <uv.h>

/* Starts the timer (first run one second after start). 0 or a negative uv error. */
int sweeper_init(uv_loop_t *loop);
/* Stops the timer and closes its handle (the loop must run once more to free it). A run in
 * flight finishes and its result is dropped. */
void sweeper_shutdown(void);

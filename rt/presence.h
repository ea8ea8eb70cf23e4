/*
 * Presence: a user is online while they made a request in the last 60 s or hold an open stream.
 * Kept in Redis so every worker and host agrees: `presence:<userId>` (expires after 60 s) and
 * `lastseen:<userId>` (epoch ms of the last heartbeat, kept 30 days).
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

/* Records activity. Writes to Redis at most once per 15 s per user and worker (a small
 * direct-mapped cache absorbs the rest), so hot users cost no extra round trips. */
void presence_touch(const char *user_id);
/* Same, without the throttle (stream heartbeats). */
void presence_heartbeat(const char *user_id);

typedef void (*presence_cb)(bool ok, bool online, int64_t last_seen_ms, void *data);
/* Reads the state; last_seen_ms is 0 when unknown. ok is false when Redis is unavailable. */
void presence_get(const char *user_id, presence_cb cb, void *data);

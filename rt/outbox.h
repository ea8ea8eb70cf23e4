/*
 * Transactional outbox for mail, push and stored-object deletions. Routes (and rt/janitor.c)
 * write rows into the `outbox` table in the same statement/transaction as the change that causes
 * them; after commit they call outbox_kick(). The drainer (its statements: db/queries/outbox.sql)
 * claims due rows with a lease (UPDATE ... FOR UPDATE SKIP LOCKED, so several workers never send
 * one row twice), sends them through libcurl multi, marks them sent, or schedules a retry with
 * exponential backoff (max 10 attempts).
 *
 * Row payloads (jsonb):
 *   kind 'mail': {"to": "...", "subject": "...", "text": "...", "html": "..."(optional)}
 *   kind 'push': {"to": ["ExponentPushToken[..]", ...], "title": "...", "body": "...",
 *                 "data": {...}}   (sent in batches of at most 100 messages)
 *   kind 'storage_delete': {"key": "..."}   (rt/storage.h storage_delete)
 */
#pragma once
#include <uv.h>

int outbox_init(uv_loop_t *loop);
void outbox_shutdown(void);
/* Drain soon (next loop iteration), e.g. right after a commit that queued rows. */
void outbox_kick(void);

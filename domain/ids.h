/*
 * Identifiers: UUID v4 (organizations, mentorships, sessions, files, invites, messages) and
 * CUID v1 (users). Randomness and the clock come from the caller, so ids are reproducible in
 * tests. Output buffers belong to the caller.
 */
#pragma once
#include <stdbool.h>
#include <stdint.h>

#define IDS_UUID_LEN 36
#define IDS_CUID_LEN 25
#define IDS_CUID_RANDOM_BYTES 8

/* Formats 16 random bytes as a lower-case version-4 UUID
 * "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" (y in 8..b); out gets 37 bytes. */
void ids_uuid_v4(const uint8_t rnd[16], char out[IDS_UUID_LEN + 1]);
/* True for the canonical 8-4-4-4-12 hex form of any version; either case is accepted. */
bool ids_is_uuid(const char *s);

/* CUID v1: 'c' + 8 base36 digits of now_ms + 4 of counter + 4 of fingerprint (a per-process
 * value, e.g. derived from pid and host name) + 8 from rnd; always 25 lower-case characters.
 * Each part keeps its low-order digits, so the counter and fingerprint wrap at 36^4. */
void ids_cuid(uint64_t now_ms, uint32_t counter, uint32_t fingerprint,
              const uint8_t rnd[IDS_CUID_RANDOM_BYTES], char out[IDS_CUID_LEN + 1]);
/* True for 'c' followed by 24 characters of [0-9a-z]. */
bool ids_is_cuid(const char *s);

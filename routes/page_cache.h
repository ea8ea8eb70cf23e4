/*
 * Rendered list pages, per worker process (the scheme of the member list of
 * routes/organizations.c, shared by GET /api/mentorships, GET /api/sessions and the
 * organization-scoped GET /api/users). A page is cached under its key (the list, the
 * organization, the caller's visibility class and the normalized query) with a version that
 * changes in the same transaction as anything the page shows, read in the statement that
 * produced the page. A request reuses it only after a one-row query confirms the version is
 * still current; the guard has checked the caller's organization and role just before, as it
 * does for the list statement, so a reuse never shows anything a fresh read would not.
 * Direct-mapped (a colliding key replaces the slot), bounded in slots and bytes.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "core/http.h"
#include "db/db.h"

#define PAGE_NO_VERSION (-1) /* the organization has no version row yet */

#define PAGE_CACHE_SLOTS 256
#define PAGE_CACHE_MAX_BODY (512 * 1024)
#define PAGE_CACHE_MAX_BYTES (16 * 1024 * 1024) /* bodies held per list and worker */

typedef struct page_entry {
    char *key; /* NULL: empty slot */
    long long version;
    char *body;
    size_t len;
    bool refs; /* holds storage references (rendered as URLs when sent) */
} page_entry_t;

struct page_cache {
    page_entry_t slots[PAGE_CACHE_SLOTS];
    size_t bytes;
};

/* Define one per list: static page_cache_t pages; (zero-initialized, never freed). */
typedef struct page_cache page_cache_t;

/* A cache key (arena) from n fields; NULL fields are distinct from empty ones, and each field
 * is length-prefixed, so no value can make two queries share a key. */
const char *page_cache_key(http_req_t *req, int n, const char *const *fields);
/* The version column of row 0 (PAGE_NO_VERSION when NULL). */
long long page_row_version(const db_result_t *r, int col);
/* True when the page of `key` is cached (at any version). */
bool page_cache_has(page_cache_t *c, const char *key);
/* Replies with the cached page of `key` and returns true when it was read at `version`. */
bool page_cache_reply(page_cache_t *c, const char *key, long long version, http_req_t *req);
/* The entry of `key` when it was read at `version`, else NULL (valid until the next put). */
const page_entry_t *page_cache_get(page_cache_t *c, const char *key, long long version);
/* Stores a page (copied), replacing the slot's previous entry. */
void page_cache_put(page_cache_t *c, const char *key, long long version, const char *body,
                    size_t len);

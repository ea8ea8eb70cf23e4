/*
 * Coalescing one-row statements: many callers each ask for one statement with one row of
 * parameters; the coalescer sends one statement for a whole group of them, with one PostgreSQL
 * array per parameter position, and hands each caller its own row (or its failure).
 *
 * The statement's contract:
 *   - parameter $k is a text array literal ("{...}"): element i is caller i's k-th parameter
 *     (SQL NULL for a NULL parameter); the statement casts it (`$1::uuid[]`) and reads the
 *     elements together, for example `unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS s(...)`;
 *   - it returns at most one row per caller, with a column (`ord_col`) holding the caller's
 *     1-based position in the arrays (`s.ord`, `WITH ORDINALITY`). A caller without a row gets
 *     row -1 ("no row"); a row whose ord is no caller's is ignored.
 *   - It may be sent with arrays of one element (a caller alone, see retry_alone), so it must
 *     give the same answer for a caller alone as in a group.
 *
 * When a group is sent:
 *   - DB_COALESCE_TURN: callers that come during one turn of the loop are sent after the
 *     turn's I/O (from a uv_check handle), one statement per key; a key whose group reaches
 *     batch_max is sent at once. Every caller of a group arrived before its statement was
 *     sent, so each sees everything committed before it arrived.
 *   - DB_COALESCE_INFLIGHT: at most inflight_max statements per key are in flight. Callers
 *     that find fewer in flight go at the end of the loop turn, like TURN's, every caller of
 *     the turn together; a lone caller waits for nothing but the turn's other callbacks.
 *     Callers that arrive while inflight_max are in flight wait, and go together (up to
 *     batch_max per statement) at the end of the turn in which one comes back. Sending the
 *     first caller of a turn at once would leave the others to the next free statement: the
 *     callers of one statement that came back (a coalesced read) add their next step in one
 *     turn, and a statement of one caller would take a slot for a whole round trip.
 *   In both modes a key whose waiting callers reach batch_max, with a slot free, goes at once.
 *   Once db_shutdown began, callers go at once (and fail), not at the end of the turn: those
 *   that waited for a statement it fails are answered before it returns (main.c then closes
 *   every handle, the check among them).
 * Keys are strings (a mentorship id, "" for one global group); each has its own entry, found
 * through a hash table of `slots` buckets whose entries chain, so keys that share a bucket
 * never wait on each other. An entry is freed once nothing of its key waits or is in flight.
 *
 * A failed statement (r->ok false) gives every caller of it that failure, except with
 * retry_alone: a group of more than one that failed other than by a lost connection is sent
 * again caller by caller, each alone (arrays of one) once the one before it answered, in the
 * group's order, and each caller gets its own answer (one caller's bad row, such as a foreign
 * key that went away, then fails that caller only). A caller whose turn comes after it no longer
 * wants an answer (`gone`) is skipped, as in a group. The retries, one statement at a time, are
 * not counted against inflight_max: while they run, their key may have one more in flight.
 *
 * Parameter strings must stay valid until the caller's callback ran (they are read when the
 * group is sent). Callbacks run from the pool's callback (db.h), in the callers' order; the
 * result is valid only during the callback. db/ knows nothing of what a caller is: `gone`
 * tells whether a waiting caller still wants its answer.
 */
#pragma once
#include <stdbool.h>

#include "db/db.h"

typedef struct db_coalesce db_coalesce_t;

typedef enum db_coalesce_mode {
    DB_COALESCE_TURN,    /* one statement per key per loop turn */
    DB_COALESCE_INFLIGHT /* at most inflight_max statements per key in flight */
} db_coalesce_mode_t;

/* r: the statement's result (r->ok false: it failed, see above); row: the caller's row in r,
 * -1 when the statement returned none for it. r is NULL when the caller was not sent because
 * `gone` said so. */
typedef void (*db_coalesce_cb)(db_result_t *r, int row, void *data);

typedef struct db_coalesce_opts {
    const char *sql; /* static, as db_query wants */
    int nparams;     /* parameters per caller: the statement's array parameters */
    int ord_col;     /* the result column with the caller's 1-based position */
    db_coalesce_mode_t mode;
    int inflight_max; /* DB_COALESCE_INFLIGHT: statements per key in flight (>= 1) */
    int batch_max;    /* callers per statement (>= 1) */
    int slots;        /* buckets of the key table (0: 64) */
    bool first;       /* send with db_query_first (a statement that takes a lock others wait on) */
    bool retry_alone; /* a failed group is sent again caller by caller */
    /* Optional: true when a waiting caller no longer wants its answer; it is left out of its
     * group and its callback gets r == NULL. */
    bool (*gone)(void *data);
    /* Optional: called before and after the callbacks of one statement's callers (to group
     * what they do, such as events published together). */
    void (*deliver_begin)(void);
    void (*deliver_end)(void);
} db_coalesce_opts_t;

/* A coalescer (opts copied). Needs the pool running (db_init) before its first call. */
db_coalesce_t *db_coalesce_new(const db_coalesce_opts_t *opts);
/* Adds a caller under `key` (copied); params: opts.nparams strings or NULL. The callback runs
 * exactly once, later, never from inside this call. */
void db_coalesce_add(db_coalesce_t *c, const char *key, const char *const *params,
                     db_coalesce_cb cb, void *data);
/* Statements of this coalescer in flight and callers waiting (tests, metrics). */
int db_coalesce_inflight(const db_coalesce_t *c);
int db_coalesce_waiting(const db_coalesce_t *c);
/* Frees a coalescer with nothing waiting or in flight (its check and idle handles close). */
void db_coalesce_free(db_coalesce_t *c);

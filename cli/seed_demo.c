/*
 * `coachd seed-demo`: demo data for building a client against a development database. Two
 * organizations (Northwind Academy and the Spanish-speaking Colegio Sierra Azul) with an Owner,
 * OrganizationAdmins, a Manager, Coaches and Teachers (English and Spanish, several time
 * zones), mentorships in every status, sessions in every status (past ones final, upcoming ones
 * scheduled or confirmed, all relative to now), chat threads with replies, an edit, a deletion,
 * reactions, read receipts and a file attachment whose bytes are in storage, and pending
 * invites for addresses without an account. The rows are those the API would have written
 * (db/queries/demo.sql says how), so every answer on them is a documented one.
 *
 * The accounts are this file's table: the command prints them (role, name, email, password)
 * with the organization ids and the links of the pending invites. Invite tokens are stored
 * hashed, so their links can only be printed by the run that creates them.
 *
 * Idempotent: the data is there when every demo email has an account; a run then changes
 * nothing and prints the accounts again. When only some of them exist (someone signed up with
 * one of the addresses), or when an address it invites has an account (the invite would hold
 * that user at the invite gate), it refuses and changes nothing. Everything is one transaction
 * behind an advisory lock, so a failure leaves nothing and two runs cannot both seed; the
 * attachment's object is stored before the commit and deleted again when the commit fails.
 *
 * Refused when APP_ENV=production: these accounts have published passwords.
 *
 * The shape of cli/first_run.c: migrations first, then the async pool (db/db.h) on a loop of
 * its own; passwords are hashed on the loop's thread pool (argon2id, password_hash_fresh); the
 * attachment goes through the storage writer of rt/storage.h (local or s3, as the server
 * stores uploads). Exit status: 0 seeded or already seeded; 1 refused or failed; 2 malformed
 * command line.
 */
#include "cli/seed_demo.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/arena.h"
#include "core/buf.h"
#include "core/config.h"
#include "core/log.h"
#include "db/db.h"
#include "db/q_demo.h"
#include "domain/ids.h"
#include "domain/password.h"
#include "domain/text.h"
#include "domain/token.h"
#include "rt/curlm.h"
#include "rt/storage.h"
#include "routes/common.h"

#define USAGE "usage: coachd seed-demo\n"

#define NORTHWIND "Northwind Academy"
#define SIERRA "Colegio Sierra Azul"

typedef struct account {
    const char *role; /* as printed: the global role, else the organization role */
    const char *first, *last, *email, *password, *lang, *tz;
    const char *global_role; /* NULL for organization members */
    int days;                /* account made this many days ago */
    const char *where;
} account_t;

/* db/queries/demo.sql names these users by email (memberships, mentorships, chat). */
static const account_t ACCOUNTS[] = {
    {"Owner", "Olivia", "Bennett", "owner@northwind.example", "Demo-owner-2026!", "en",
     "America/New_York", "Owner", 220, "global role, current organization Northwind"},
    {"OrganizationAdmin", "Marcus", "Reid", "admin@northwind.example", "Demo-admin-2026!", "en",
     "America/Chicago", NULL, 205, "Northwind"},
    {"OrganizationAdmin", "Lucía", "Fernández", "admin2@northwind.example", "Demo-admin-2026!",
     "es", "Europe/Madrid", NULL, 200, "Northwind and Sierra Azul"},
    {"Manager", "Priya", "Shah", "manager@northwind.example", "Demo-manager-2026!", "en",
     "America/Los_Angeles", NULL, 190, "Northwind"},
    {"Coach", "Daniel", "Brooks", "coach@northwind.example", "Demo-coach-2026!", "en",
     "America/New_York", NULL, 180, "Northwind; a mentorship in every status"},
    {"Coach", "Sofía", "Martínez", "coach2@northwind.example", "Demo-coach-2026!", "es",
     "America/Mexico_City", NULL, 170, "Northwind and Sierra Azul"},
    {"Coach", "Ethan", "Walker", "coach3@northwind.example", "Demo-coach-2026!", "en",
     "Europe/London", NULL, 160, "Northwind"},
    {"Teacher", "Emma", "Collins", "teacher@northwind.example", "Demo-teacher-2026!", "en",
     "America/New_York", NULL, 150, "Northwind; the fullest chat"},
    {"Teacher", "Mateo", "García", "teacher2@northwind.example", "Demo-teacher-2026!", "es",
     "America/Bogota", NULL, 140, "Northwind"},
    {"Teacher", "Hannah", "Kim", "teacher3@northwind.example", "Demo-teacher-2026!", "en",
     "America/Phoenix", NULL, 120, "Northwind"},
    {"Teacher", "Valentina", "Rojas", "teacher4@northwind.example", "Demo-teacher-2026!", "es",
     "America/Santiago", NULL, 135, "Northwind"},
    {"Teacher", "Noah", "Turner", "teacher5@northwind.example", "Demo-teacher-2026!", "en",
     "America/Denver", NULL, 110, "Northwind"},
    {"Teacher", "Javier", "Morales", "teacher@sierra-azul.example", "Demo-teacher-2026!", "es",
     "Europe/Madrid", NULL, 140, "Sierra Azul"},
};
#define N_ACCOUNTS ((int)(sizeof ACCOUNTS / sizeof ACCOUNTS[0]))
#define ANCHOR_NORTHWIND "admin@northwind.example" /* first OrganizationAdmin membership */
#define ANCHOR_SIERRA "admin2@northwind.example"   /* latest OrganizationAdmin membership */

typedef struct invite {
    const char *org; /* "nw" or "sa" */
    const char *email, *role, *by;
    int hours;        /* sent this many hours ago */
    const char *lang; /* of the printed link, as an invite mail's would carry */
} invite_t;

static const invite_t INVITES[] = {
    {"nw", "new.coach@northwind.example", "Coach", "admin@northwind.example", 30, "en"},
    {"nw", "new.teacher@northwind.example", "Teacher", "manager@northwind.example", 20, "en"},
    {"nw", "nueva.docente@northwind.example", "Teacher", "admin2@northwind.example", 3, "es"},
    {"sa", "nuevo.profesor@sierra-azul.example", "Teacher", "admin2@northwind.example", 48, "es"},
};
#define N_INVITES ((int)(sizeof INVITES / sizeof INVITES[0]))

/* The chat attachment (message 'plan' of demo.sql), uploaded by coach@. */
#define FILE_NAME "Week 3 lesson plan.txt"
#define FILE_MIME "text/plain"
static const char FILE_TEXT[] =
    "Week 3 lesson plan - 7th-grade science (Ms. Collins)\n"
    "\n"
    "Goal: a three-step lab transition that takes under two minutes.\n"
    "\n"
    "1. Warm-up (5 min): two questions on the board; the countdown timer is visible.\n"
    "2. Transition (2 min): materials manager per table, goggles on, stools in.\n"
    "3. Lab (25 min): density of irregular objects; roles rotate every lab.\n"
    "4. Exit ticket (5 min): one claim, one piece of evidence.\n"
    "\n"
    "Seating chart (tables of four, mixed strengths):\n"
    "  Table 1: Ava, Liam, Sofia, Noah\n"
    "  Table 2: Mia, Lucas, Zoe, Ethan\n"
    "  Table 3: Emma, Mateo, Aria, Leo\n"
    "  Table 4: Chloe, Daniel, Lily, Owen\n";

typedef struct seed {
    uv_loop_t *loop;
    db_tx_t *tx;
    char nw_id[IDS_UUID_LEN + 1], sa_id[IDS_UUID_LEN + 1];
    char ids[N_ACCOUNTS][IDS_CUID_LEN + 1];
    char hashes[N_ACCOUNTS][PASSWORD_ENCODED_MAX];
    uv_work_t work[N_ACCOUNTS];
    int hashing;      /* hashes still running */
    bool hash_failed; /* one of them failed */
    char tokens[N_INVITES][TOKEN_LEN + 1], token_h[N_INVITES][TOKEN_HASH_LEN + 1];
    long long existing, invites_pending;
    bool created; /* this run seeded */
    /* The attachment. */
    bool with_file, stored, storage_on;
    char file_id[IDS_UUID_LEN + 1], key[256], sha[65], size[24];
    /* The transaction. */
    bool failed, conn_lost;
    char sqlstate[6];
    const char *stage;
    int status;
} seed_t;

static seed_t S;

static void note_failure(db_result_t *r)
{
    if (r->ok || S.failed) return;
    S.failed = true;
    S.conn_lost = r->conn_lost;
    snprintf(S.sqlstate, sizeof(S.sqlstate), "%s", r->sqlstate ? r->sqlstate : "");
    log_error("seed-demo: %s: %s", S.stage ? S.stage : "database",
              r->error ? r->error : "database error");
}

/* The end of the run, whatever happened: stops what was started so the loop returns. */
static void finish(void)
{
    if (S.storage_on) storage_shutdown();
    curlm_shutdown();
    db_shutdown();
}

static void fail(const char *what)
{
    fprintf(stderr, "coachd seed-demo: %s%s; nothing was changed\n", what,
            S.conn_lost ? " (database unreachable)" : "");
    S.status = 1;
}

/* ---- output ---- */

/* s, then spaces up to `width` code points (names have accents). */
static void put_col(const char *s, size_t width)
{
    size_t n = text_cp_count(s, strlen(s));
    fputs(s, stdout);
    for (; n < width; n++)
        fputc(' ', stdout);
}

static void print_report(void)
{
    printf("%s\n\n",
           S.created ? "Demo data created." : "Demo data is already there: nothing changed.");
    printf("Organizations:\n  %-22s %s\n  %-22s %s\n\n", NORTHWIND, S.nw_id, SIERRA, S.sa_id);
    printf("Accounts (verified emails; sign in with the email and the password):\n");
    put_col("  role", 21);
    put_col("name", 19);
    put_col("email", 37);
    put_col("password", 20);
    printf("where\n");
    for (int i = 0; i < N_ACCOUNTS; i++) {
        const account_t *a = &ACCOUNTS[i];
        char name[128];
        snprintf(name, sizeof name, "%s %s", a->first, a->last);
        fputs("  ", stdout);
        put_col(a->role, 19);
        put_col(name, 19);
        put_col(a->email, 37);
        put_col(a->password, 20);
        printf("%s\n", a->where);
    }
    printf("\n");
    if (S.created) {
        printf("Pending invites (addresses without an account; open the link to accept):\n");
        for (int i = 0; i < N_INVITES; i++) {
            const invite_t *v = &INVITES[i];
            fputs("  ", stdout);
            put_col(v->role, 9);
            put_col(v->email, 37);
            put_col(strcmp(v->org, "nw") == 0 ? NORTHWIND : SIERRA, 21);
            printf("%s/invite?token=%s&lang=%s\n", cfg.frontend_url, S.tokens[i], v->lang);
        }
        printf("Invite tokens are stored hashed: these links are shown only now.\n");
    } else {
        printf("Pending invites: %lld of the demo's are still pending. Their links were printed "
               "when the data was\ncreated; tokens are stored hashed, so they cannot be shown "
               "again (resending an invite,\nPOST /api/organizations/{id}/invites, makes a new "
               "link).\n",
               S.invites_pending);
    }
    if (S.created && !S.with_file)
        printf("Note: object storage is not configured (S3_BUCKET and keys), so the chat has no "
               "file attachment.\n");
    fflush(stdout);
}

/* ---- the inserts ---- */

static void on_step(db_result_t *r, void *data)
{
    (void)data;
    note_failure(r);
}

static void on_deleted(int rc, void *data)
{
    (void)data;
    if (rc != 0)
        fprintf(stderr, "coachd seed-demo: could not delete the stored object %s\n", S.key);
    finish();
}

static void on_commit(db_result_t *r, void *data)
{
    (void)data;
    S.stage = "commit";
    note_failure(r);
    if (!S.failed) {
        S.status = 0;
        print_report();
        finish();
        return;
    }
    if (strcmp(S.sqlstate, "23505") == 0)
        fail("a demo row exists already (an email or an organization)");
    else
        fail("could not write the demo data");
    if (S.stored) {
        storage_delete(S.key, on_deleted, NULL);
        return;
    }
    finish();
}

static char *users_json(void)
{
    buf_t b = {0};
    buf_putc(&b, '[');
    for (int i = 0; i < N_ACCOUNTS; i++) {
        const account_t *a = &ACCOUNTS[i];
        if (i) buf_putc(&b, ',');
        buf_puts(&b, "{\"id\":");
        buf_json_str(&b, S.ids[i]);
        buf_puts(&b, ",\"email\":");
        buf_json_str(&b, a->email);
        buf_puts(&b, ",\"first\":");
        buf_json_str(&b, a->first);
        buf_puts(&b, ",\"last\":");
        buf_json_str(&b, a->last);
        buf_puts(&b, ",\"lang\":");
        buf_json_str(&b, a->lang);
        buf_puts(&b, ",\"tz\":");
        buf_json_str(&b, a->tz);
        buf_puts(&b, ",\"role\":");
        if (a->global_role)
            buf_json_str(&b, a->global_role);
        else
            buf_puts(&b, "null");
        buf_puts(&b, ",\"hash\":");
        buf_json_str(&b, S.hashes[i]);
        buf_printf(&b, ",\"days\":%d}", a->days);
    }
    buf_putc(&b, ']');
    return buf_steal(&b);
}

static char *invites_json(void)
{
    buf_t b = {0};
    buf_putc(&b, '[');
    for (int i = 0; i < N_INVITES; i++) {
        const invite_t *v = &INVITES[i];
        if (i) buf_putc(&b, ',');
        buf_puts(&b, "{\"org\":");
        buf_json_str(&b, v->org);
        buf_puts(&b, ",\"email\":");
        buf_json_str(&b, v->email);
        buf_puts(&b, ",\"role\":");
        buf_json_str(&b, v->role);
        buf_puts(&b, ",\"by\":");
        buf_json_str(&b, v->by);
        buf_puts(&b, ",\"hash\":");
        buf_json_str(&b, S.token_h[i]);
        buf_printf(&b, ",\"hours\":%d}", v->hours);
    }
    buf_putc(&b, ']');
    return buf_steal(&b);
}

/* Every insert, in dependency order, then COMMIT. The pool copies parameters when it queues a
 * statement, so the JSON texts are freed right away. */
static void queue_inserts(void)
{
    db_tx_t *tx = S.tx;
    char *users = users_json(), *invites = invites_json();
    const char *orgs[] = {S.nw_id, S.sa_id};
    const char *p_users[] = {users};
    const char *p_invites[] = {S.nw_id, S.sa_id, invites};
    const char *p_file[] = {S.nw_id, S.file_id, FILE_NAME, FILE_MIME, S.size, S.sha, S.key};
    const char *p_chat[] = {S.with_file ? S.file_id : NULL};
    S.stage = "demo data";
    db_tx_query(tx, SQL_DEMO_USERS, 1, p_users, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_ORGANIZATIONS, 2, orgs, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_MEMBERS, 2, orgs, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_INVITES, 3, p_invites, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_MENTORSHIPS, 2, orgs, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_SESSIONS, 0, NULL, on_step, NULL);
    if (S.with_file) db_tx_query(tx, SQL_DEMO_FILE, 7, p_file, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_CHAT, 1, p_chat, on_step, NULL);
    db_tx_commit(tx, on_commit, NULL);
    free(users);
    free(invites);
}

/* ---- the attachment's bytes ---- */

static void on_drain(void *data)
{
    (void)data;
}

static void on_stored(int rc, uint64_t size, const char *sha256_hex, void *data)
{
    (void)data;
    if (rc != 0) {
        fprintf(stderr, "coachd seed-demo: could not store the chat attachment under %s (%s)\n",
                S.key, cfg.storage_driver);
        fail("storage failed");
        db_tx_rollback(S.tx);
        finish();
        return;
    }
    S.stored = true;
    snprintf(S.sha, sizeof S.sha, "%s", sha256_hex);
    snprintf(S.size, sizeof S.size, "%llu", (unsigned long long)size);
    queue_inserts();
}

static void store_file(void)
{
    bool local = strcmp(cfg.storage_driver, "s3") != 0;
    if (storage_init(S.loop) != 0) {
        fail("could not start the storage driver");
        db_tx_rollback(S.tx);
        finish();
        return;
    }
    S.storage_on = true;
    S.with_file = local || storage_ready();
    if (!S.with_file) {
        queue_inserts();
        return;
    }
    arena_t a;
    arena_init(&a);
    new_uuid(S.file_id);
    snprintf(S.key, sizeof S.key, "%s", storage_key_make(&a, "uploads", S.file_id, FILE_NAME));
    arena_free(&a);
    storage_writer_t *w = storage_writer_new(on_drain, NULL);
    storage_writer_write(w, FILE_TEXT, sizeof FILE_TEXT - 1);
    storage_writer_finish(w, S.key, FILE_MIME, on_stored, NULL);
}

/* ---- hashing ---- */

static void hash_work(uv_work_t *w)
{
    int i = (int)(w - S.work);
    if (password_hash_fresh(ACCOUNTS[i].password, S.hashes[i]) != 0) S.hash_failed = true;
}

static void hash_done(uv_work_t *w, int status)
{
    (void)w;
    if (status != 0) S.hash_failed = true;
    if (--S.hashing > 0) return;
    if (S.hash_failed) {
        fail("could not hash the passwords");
        db_tx_rollback(S.tx);
        finish();
        return;
    }
    store_file();
}

/* ---- the state ---- */

static void on_state(db_result_t *r, void *data)
{
    (void)data;
    note_failure(r);
    if (S.failed) {
        fail("could not read the database");
        db_tx_rollback(S.tx);
        finish();
        return;
    }
    S.existing = db_getll(r, 0, DEMO_STATE_EXISTING, -1);
    S.invites_pending = db_getll(r, 0, DEMO_STATE_INVITES_PENDING, 0);
    const char *nw = db_get(r, 0, DEMO_STATE_NORTHWIND_ID),
               *sa = db_get(r, 0, DEMO_STATE_SIERRA_ID);
    if (S.existing == N_ACCOUNTS && nw && sa) {
        snprintf(S.nw_id, sizeof S.nw_id, "%s", nw);
        snprintf(S.sa_id, sizeof S.sa_id, "%s", sa);
        S.created = false;
        db_tx_commit(S.tx, on_commit, NULL); /* read only: nothing to commit */
        return;
    }
    if (S.existing == 0 && db_getll(r, 0, DEMO_STATE_INVITEES_WITH_ACCOUNT, 0) != 0) {
        fprintf(stderr, "coachd seed-demo: one of the addresses the demo invites has an account "
                        "(a pending invite would hold that user at the invite gate):");
        for (int i = 0; i < N_INVITES; i++)
            fprintf(stderr, " %s", INVITES[i].email);
        fprintf(stderr, "; nothing was changed.\n");
        S.status = 1;
        db_tx_rollback(S.tx);
        finish();
        return;
    }
    if (S.existing != 0) {
        fprintf(stderr,
                "coachd seed-demo: %lld of the %d demo accounts exist already (their emails are "
                "taken), but not the demo data as a whole; nothing was changed. Seed an empty "
                "database, or remove those accounts first.\n",
                S.existing, N_ACCOUNTS);
        S.status = 1;
        db_tx_rollback(S.tx);
        finish();
        return;
    }
    S.created = true;
    new_uuid(S.nw_id);
    new_uuid(S.sa_id);
    for (int i = 0; i < N_ACCOUNTS; i++)
        new_cuid(S.ids[i]);
    for (int i = 0; i < N_INVITES; i++)
        new_token(S.tokens[i], S.token_h[i]);
    S.hashing = N_ACCOUNTS;
    for (int i = 0; i < N_ACCOUNTS; i++)
        if (uv_queue_work(S.loop, &S.work[i], hash_work, hash_done) != 0) abort();
}

/* The demo emails as a PostgreSQL text[] literal: the accounts' or the pending invites'
 * (plain addresses: no quote or backslash to escape). */
static char *emails_array(bool invites)
{
    buf_t b = {0};
    int n = invites ? N_INVITES : N_ACCOUNTS;
    buf_putc(&b, '{');
    for (int i = 0; i < n; i++)
        buf_printf(&b, "%s\"%s\"", i ? "," : "", invites ? INVITES[i].email : ACCOUNTS[i].email);
    buf_putc(&b, '}');
    return buf_steal(&b);
}

static void on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    (void)data;
    if (!tx) {
        note_failure(r);
        fail("could not start a transaction");
        finish();
        return;
    }
    S.tx = tx;
    char *emails = emails_array(false), *invites = emails_array(true);
    const char *params[] = {emails, ANCHOR_NORTHWIND, ANCHOR_SIERRA, invites};
    S.stage = "lock";
    db_tx_query(tx, SQL_DEMO_LOCK, 0, NULL, on_step, NULL);
    db_tx_query(tx, SQL_DEMO_STATE, 4, params, on_state, NULL);
    free(emails);
    free(invites);
}

static void close_all(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

int cli_seed_demo(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 'h') {
            fputs(USAGE, stdout);
            return 0;
        }
        fprintf(stderr, "coachd seed-demo: unknown option\n%s", USAGE);
        return 2;
    }
    if (optind < argc) {
        fprintf(stderr, "coachd seed-demo: unexpected argument\n%s", USAGE);
        return 2;
    }
    /* Before config_load, which may refuse a production environment for its own reasons. */
    const char *env = getenv("APP_ENV");
    if (config_load() != 0 && !(env && strcmp(env, "production") == 0)) return 1;
    if (cfg.production || (env && strcmp(env, "production") == 0)) {
        fprintf(stderr, "coachd seed-demo: refused: APP_ENV=production. The demo accounts have "
                        "published passwords; seed development databases only.\n");
        return 1;
    }
    if (!cfg.database_url) {
        log_error("DATABASE_URL is not set");
        return 1;
    }
    if (db_migrate(cfg.database_url) != 0) return 1;

    memset(&S, 0, sizeof S);
    S.status = 1;
    uv_loop_t loop;
    uv_loop_init(&loop);
    S.loop = &loop;
    if (curlm_init(&loop) != 0) return 1;
    if (db_init(&loop, cfg.database_url, 1) != 0) return 1;
    db_tx_begin(on_begin, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_walk(&loop, close_all, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    fflush(stdout);
    return S.status;
}

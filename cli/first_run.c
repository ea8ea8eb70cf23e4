/*
 * `coachd first-run --email E --name "First Last" [--language en|es]`: the operator's way to
 * create the first PlatformAdmin, for a deployment whose HTTP first-run is closed (production
 * without SETUP_TOKEN). The password comes from standard input, one line, so it never shows in
 * a process list or a shell history.
 *
 * The rules are POST /api/setup/first-run's: the same validation (email, a name of 1..201
 * characters split at its first space into parts of at most 100, a password of 8..128 that
 * passes the rules of domain/pwpolicy.h), the same
 * argon2id hashing and id generator, the same statements (db/queries/setup.sql) in the same
 * transaction behind the same advisory lock, so a CLI run and an HTTP call cannot both create
 * an administrator. Migrations are applied first, as `coachd migrate` does.
 *
 * The database work runs on the async pool (db/db.h) on a loop of its own: the one transaction
 * machinery of the server, no second copy in synchronous libpq. Hashing runs before the loop
 * starts.
 *
 * Exit status: 0 with the new user's id on standard output; 1 when the platform is initialized
 * already, the email is taken or the database fails; 2 for a malformed command line or input
 * (unknown option, invalid email, name, language or password, no password on standard input).
 */
#include "cli/first_run.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>
#include <uv.h>

#include "core/config.h"
#include "core/log.h"
#include "db/db.h"
#include "db/q_setup.h"
#include "domain/password.h"
#include "domain/pwpolicy.h"
#include "domain/text.h"
#include "domain/validate.h"
#include "routes/common.h"

#define USAGE                                                                                      \
    "usage: coachd first-run --email EMAIL --name \"First Last\" [--language en|es]\n"             \
    "       (the password is read from standard input, one line)\n"

/* The first administrator as validated, and how the transaction went. */
typedef struct first_run {
    char email[VALIDATE_EMAIL_MAX + 1];
    char *first, *last;
    const char *lang;
    char id[IDS_CUID_LEN + 1];
    char hash[PASSWORD_ENCODED_MAX];
    int created;      /* rows the insert returned: 0 when an administrator exists */
    bool failed;      /* a statement failed */
    bool conn_lost;   /* ... because the database could not be reached */
    char sqlstate[6]; /* of the first failure */
    int status;       /* exit status */
} first_run_t;

static int usage_error(const char *msg)
{
    fprintf(stderr, "coachd first-run: %s\n%s", msg, USAGE);
    return 2;
}

/* The route's name rule (field_str 1..201 code points, trimmed; split_name; at most 100 code
 * points per part). */
static int parse_name(first_run_t *fr, const char *name)
{
    size_t n = strlen(name), off, len;
    if (!text_utf8_valid(name, n)) return -1;
    text_trim(name, n, &off, &len);
    size_t cp = text_cp_count(name + off, len);
    if (cp < 1 || cp > 201) return -1;
    char *full = strndup(name + off, len);
    if (!full) return -1;
    char *sp = strchr(full, ' ');
    fr->first = full;
    fr->last = NULL;
    if (sp) {
        *sp++ = '\0';
        while (*sp == ' ')
            sp++;
        if (*sp) fr->last = sp;
    }
    if (text_cp_count(fr->first, strlen(fr->first)) > 100 ||
        (fr->last && text_cp_count(fr->last, strlen(fr->last)) > 100))
        return -1;
    return 0;
}

/* One line from standard input, without its line ending; echo is off while a terminal types
 * it. NULL when nothing was read. */
static char *read_password(void)
{
    struct termios saved, quiet;
    bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    if (tty) {
        fprintf(stderr, "Password: ");
        quiet = saved;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t n = getline(&line, &cap, stdin);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved);
        fputc('\n', stderr);
    }
    if (n <= 0) {
        free(line);
        return NULL;
    }
    if (line[n - 1] == '\n') line[--n] = '\0';
    if (n > 0 && line[n - 1] == '\r') line[--n] = '\0';
    if (memchr(line, '\0', (size_t)n)) line[0] = '\0'; /* an embedded NUL: refused below */
    return line;
}

static void note_failure(first_run_t *fr, db_result_t *r)
{
    if (r->ok || fr->failed) return;
    fr->failed = true;
    fr->conn_lost = r->conn_lost;
    snprintf(fr->sqlstate, sizeof(fr->sqlstate), "%s", r->sqlstate ? r->sqlstate : "");
    log_error("first-run: %s", r->error ? r->error : "database error");
}

static void on_lock(db_result_t *r, void *data)
{
    note_failure(data, r);
}

static void on_create(db_result_t *r, void *data)
{
    first_run_t *fr = data;
    note_failure(fr, r);
    if (r->ok) fr->created = db_nrows(r);
}

static void on_commit(db_result_t *r, void *data)
{
    first_run_t *fr = data;
    note_failure(fr, r);
    if (!fr->failed && fr->created == 1) {
        printf("%s\n", fr->id);
        fr->status = 0;
    } else if (!fr->failed) {
        fprintf(stderr, "coachd first-run: the platform is already initialized "
                        "(an Owner or PlatformAdmin exists)\n");
    } else if (strcmp(fr->sqlstate, "23505") == 0) {
        fprintf(stderr, "coachd first-run: a user with the email %s exists already\n", fr->email);
    } else {
        fprintf(stderr, "coachd first-run: could not create the first administrator%s\n",
                fr->conn_lost ? " (database unreachable)" : "");
    }
    db_shutdown();
}

/* BEGIN, the advisory lock, the conditional insert and COMMIT, queued together as the route's
 * two steps are (the insert checks again under the lock). */
static void on_begin(db_tx_t *tx, db_result_t *r, void *data)
{
    first_run_t *fr = data;
    if (!tx) {
        note_failure(fr, r);
        fprintf(stderr, "coachd first-run: could not start a transaction%s\n",
                fr->conn_lost ? " (database unreachable)" : "");
        db_shutdown();
        return;
    }
    const char *params[] = {fr->id, fr->email, fr->first, fr->last, fr->lang, fr->hash};
    db_tx_query(tx, SQL_SETUP_LOCK, 0, NULL, on_lock, fr);
    db_tx_query(tx, SQL_SETUP_CREATE_ADMIN, 6, params, on_create, fr);
    db_tx_commit(tx, on_commit, fr);
}

static void close_all(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

int cli_first_run(int argc, char **argv)
{
    static const struct option opts[] = {{"email", required_argument, NULL, 'e'},
                                         {"name", required_argument, NULL, 'n'},
                                         {"language", required_argument, NULL, 'l'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *email = NULL, *name = NULL, *lang = "en";
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'e':
            email = optarg;
            break;
        case 'n':
            name = optarg;
            break;
        case 'l':
            lang = optarg;
            break;
        case 'h':
            fputs(USAGE, stdout);
            return 0;
        default:
            return usage_error("unknown option or missing value");
        }
    }
    if (optind < argc) return usage_error("unexpected argument");
    if (!email || !name) return usage_error("--email and --name are required");

    static first_run_t fr;
    fr.status = 1;
    if (validate_email_lower(email, fr.email, sizeof(fr.email)) != 0)
        return usage_error("--email must be a valid email address");
    if (parse_name(&fr, name) != 0)
        return usage_error("--name must be 1 to 201 characters, first and last name at most 100 "
                           "each");
    if (!validate_is_lang(lang)) return usage_error("--language must be en or es");
    fr.lang = lang;
    char *password = read_password();
    if (!password) return usage_error("no password on standard input");
    if (!password_length_ok(password)) {
        free(password);
        return usage_error("the password must be 8 to 128 characters");
    }
    pwpolicy_rule_t rule = pwpolicy_check(password, fr.email, fr.first, fr.last);
    if (rule != PWPOLICY_OK) {
        memset(password, 0, strlen(password));
        free(password);
        fprintf(stderr, "coachd first-run: the password %s\n", pwpolicy_message(rule));
        return 2;
    }

    if (config_load() != 0) return 1;
    if (!cfg.database_url) {
        log_error("DATABASE_URL is not set");
        return 1;
    }
    if (db_migrate(cfg.database_url) != 0) return 1;

    int rc = password_hash_fresh(password, fr.hash);
    memset(password, 0, strlen(password));
    free(password);
    if (rc != 0) {
        fprintf(stderr, "coachd first-run: could not hash the password\n");
        return 1;
    }
    new_cuid(fr.id);

    uv_loop_t loop;
    uv_loop_init(&loop);
    if (db_init(&loop, cfg.database_url, 1) != 0) return 1;
    db_tx_begin(on_begin, &fr);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_walk(&loop, close_all, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    fflush(stdout);
    return fr.status;
}

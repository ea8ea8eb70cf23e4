/*
 * coachd entry point: `coachd serve` (default) and `coachd migrate`.
 *
 * serve applies pending migrations (under an advisory lock), then runs WORKERS processes that
 * share the port with SO_REUSEPORT, each with its own libuv loop. A small supervisor (also for
 * WORKERS=1, so a crash is never an outage) owns one listening socket per worker slot, forks the
 * workers, replaces one that dies at once (within a second), and forwards SIGTERM/SIGINT. Because
 * the supervisor keeps the sockets open, the port never goes away while a worker is replaced:
 * connections wait in the kernel's backlog for the new worker. What /metrics needs is made there
 * too, before forking: METRICS_PORT's socket and the shared slots where each worker publishes its
 * figures (core/metrics.h), so any worker answers for all.
 *
 * Start-up: config_load refuses bad configuration before anything forks. A worker listens only
 * once what its requests depend on has loaded (at most STARTUP_WAIT_MS; await_startup_loads),
 * connections waiting in the slot socket's backlog meanwhile, and marks its slot ready (shared
 * memory) once it listens; one that exits before that failed to start, and a slot
 * whose worker fails to start WORKER_START_TRIES times in a row stops the supervisor with exit
 * status 1 (systemd then sees the failure) instead of restarting forever.
 *
 * Stopping: a worker that gets SIGTERM stops accepting, closes idle connections and event streams,
 * and lets requests in flight (uploads and downloads included) finish within
 * SHUTDOWN_GRACE_SECONDS. What still runs then is cut (core/http.c: each request's on_gone, so
 * temporary files go) and the worker exits 1; it exits 0 only when nothing was cut. The supervisor
 * exits 0 only when every worker did.
 */
#include <errno.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cli/end_sessions.h"
#include "cli/first_run.h"
#include "cli/seed_demo.h"
#include "core/config.h"
#include "core/http.h"
#include "core/log.h"
#include "core/metrics.h"
#include "db/db.h"
#include "routes/routes.h"
#include "rt/curlm.h"
#include "rt/mail.h"
#include "rt/outbox.h"
#include "rt/push.h"
#include "rt/redis.h"
#include "rt/storage.h"

/* Start failures in a row of one worker slot before the supervisor gives up. */
#define WORKER_START_TRIES 5
/* After the grace, how long the cut requests' teardown (temporary files removed, connections
 * closed) may take before the worker exits regardless. */
#define ABORT_BOUND_MS 5000
/* At most this long a worker waits for its start-up loads before it serves anyway
 * (await_startup_loads). */
#define STARTUP_WAIT_MS 10000

static uv_loop_t *loop;
static uv_signal_t sig_term, sig_int;
static uv_timer_t grace_timer, abort_bound;
static bool stopping, bound_started;
static int worker_status; /* the worker's exit status: 1 once a request was cut */
/* One flag per worker slot, shared with the supervisor: set once the worker listens. */
static volatile int *slot_ready;
/* METRICS_PORT's socket, made by the supervisor and shared by every worker; -1: none. */
static int metrics_fd = -1;

static void on_walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    /* The bound on a teardown after the grace stays until the loop has ended. */
    if (h == (uv_handle_t *)&abort_bound) return;
    /* The signal handlers stay too (on_signal). */
    if (h == (uv_handle_t *)&sig_term || h == (uv_handle_t *)&sig_int) return;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void on_abort_bound(uv_timer_t *t);

/* Bounds the rest of the worker's life by ABORT_BOUND_MS: the teardown of what the grace cut,
 * or of the modules once the connections are gone, must not hang the stop. Started once. */
static void start_teardown_bound(void)
{
    if (bound_started) return;
    bound_started = true;
    uv_timer_init(loop, &abort_bound);
    uv_timer_start(&abort_bound, on_abort_bound, ABORT_BOUND_MS, 0);
    uv_unref((uv_handle_t *)&abort_bound);
}

static void on_server_drained(void)
{
    log_info("worker %d: connections drained", (int)getpid());
    start_teardown_bound();
    routes_shutdown();
    outbox_shutdown();
    storage_shutdown();
    mail_shutdown();
    push_shutdown();
    curlm_shutdown();
    redis_shutdown();
    db_shutdown();
    uv_walk(loop, on_walk_close, NULL);
}

static void on_abort_bound(uv_timer_t *t)
{
    (void)t;
    log_error("worker %d: teardown did not end within %d ms; exiting", (int)getpid(),
              ABORT_BOUND_MS);
    _exit(1);
}

/* The grace is over: what still runs is cut, cleanly (on_gone for each request), and the loop
 * ends as the connections close (on_server_drained). */
static void on_grace_over(uv_timer_t *t)
{
    (void)t;
    size_t cut = http_server_abort_all();
    if (cut > 0) {
        worker_status = 1;
        log_error("worker %d: drain incomplete: %zu requests cut after SHUTDOWN_GRACE_SECONDS=%d",
                  (int)getpid(), cut, cfg.shutdown_grace_seconds);
    }
    start_teardown_bound();
}

static void on_signal(uv_signal_t *s, int signum)
{
    (void)s;
    if (stopping) return;
    stopping = true;
    log_info("worker %d: signal %d, shutting down (grace %d s)", (int)getpid(), signum,
             cfg.shutdown_grace_seconds);
    /* Unreferenced: the connections keep the loop alive, the timer only bounds them. */
    uv_timer_init(loop, &grace_timer);
    uv_timer_start(&grace_timer, on_grace_over, (uint64_t)cfg.shutdown_grace_seconds * 1000, 0);
    uv_unref((uv_handle_t *)&grace_timer);
    /* Draining already: a second signal (Ctrl-C reaches the supervisor and every worker, and
     * the supervisor forwards SIGTERM) must not kill the worker with the default action. The
     * handlers stay installed to the end (unreferenced, so they do not keep the loop alive, and
     * on_walk_close leaves them): stopping them would put back the default action, and a signal
     * in the moment before SIG_IGN replaced it killed the worker mid-drain. */
    uv_unref((uv_handle_t *)&sig_term);
    uv_unref((uv_handle_t *)&sig_int);
    http_server_shutdown(on_server_drained);
}

/* The local storage root must exist before the health probe or uploads look at it; this runs
 * once, before the loop starts. */
static int storage_dir_create(void)
{
    if (strcmp(cfg.storage_driver, "local") != 0) return 0;
    uv_fs_t req;
    char path[4096];
    snprintf(path, sizeof(path), "%s", cfg.storage_dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        uv_fs_mkdir(NULL, &req, path, 0755, NULL);
        uv_fs_req_cleanup(&req);
        *p = '/';
    }
    int rc = uv_fs_mkdir(NULL, &req, path, 0755, NULL);
    uv_fs_req_cleanup(&req);
    if (rc != 0 && rc != UV_EEXIST) {
        log_error("storage: cannot create %s: %s", cfg.storage_dir, uv_strerror(rc));
        return -1;
    }
    return 0;
}

/* SIGTERM, SIGINT and SIGCHLD stay blocked in the supervisor and are taken with sigtimedwait, so
 * a signal arriving between two checks is never lost. A worker keeps them
 * blocked until its loop has its own handlers. */
static void sup_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGCHLD);
}

/* What a worker's requests depend on that loads in the background at start: the storage secret
 * kept in the database (local driver without STORAGE_SECRET; before it, presign, upload, local
 * URLs and avatar references would answer 503 "Storage is not configured" or render nothing) and
 * the first attempt of the Redis command connection (before it, Redis commands fail at once:
 * resend-activation and forget-password answer 503, limits go unenforced). The database pool
 * needs no wait: statements queue until a connection is up. */
static bool startup_loaded(void)
{
    return storage_loaded() && redis_first_attempt_done();
}

static void on_startup_bound(uv_timer_t *t)
{
    (void)t; /* wakes the loop of await_startup_loads */
}

/* Runs the loop until the start-up loads are done, STARTUP_WAIT_MS has passed, or a stop signal
 * came. The worker does not listen meanwhile: connections made wait in the backlog of the
 * slot's socket (the supervisor's, open all along), as while a worker is replaced, and are served
 * once it listens. So no request ever sees a half-started worker, and readiness cannot say ok
 * before it is ready. A load still missing after the bound (its dependency is down) no longer
 * holds the worker back: it serves, says what is missing, and what depends on it answers 503
 * until the retries load it. */
static void await_startup_loads(void)
{
    static uv_timer_t bound;
    uv_update_time(loop);
    uint64_t t0 = uv_now(loop);
    uv_timer_init(loop, &bound);
    uv_timer_start(&bound, on_startup_bound, STARTUP_WAIT_MS, 0);
    while (!stopping && !startup_loaded() && uv_now(loop) - t0 < STARTUP_WAIT_MS)
        uv_run(loop, UV_RUN_ONCE);
    if (!uv_is_closing((uv_handle_t *)&bound)) uv_close((uv_handle_t *)&bound, NULL);
    if (stopping) return;
    uint64_t took = uv_now(loop) - t0;
    if (!startup_loaded())
        log_warn("worker %d: serving without %s after %llu ms; it answers 503 for what needs it "
                 "until it is there",
                 (int)getpid(),
                 !storage_loaded() ? "the storage secret (from the database)"
                                   : "a first Redis connection attempt",
                 (unsigned long long)took);
    else if (took >= 1000)
        log_info("worker %d: start-up loads took %llu ms", (int)getpid(), (unsigned long long)took);
}

static int run_worker(int slot, int listen_fd)
{
    loop = uv_default_loop();
    signal(SIGPIPE, SIG_IGN);
    if (curlm_init(loop) != 0) return 1;
    if (mail_init(loop) != 0) return 1;
    if (push_init(loop) != 0) return 1;
    if (redis_init(loop, cfg.redis_url) != 0) return 1;
    if (db_init(loop, cfg.database_url, cfg.db_pool_size) != 0) return 1;
    if (outbox_init(loop) != 0) return 1;
    if (storage_init(loop) != 0) return 1;
    routes_init(loop);
    uv_signal_init(loop, &sig_term);
    uv_signal_init(loop, &sig_int);
    uv_signal_start(&sig_term, on_signal, SIGTERM);
    uv_signal_start(&sig_int, on_signal, SIGINT);
    /* Blocked since the fork: a SIGTERM that came during start-up is delivered now, to the
     * handlers above, so even an early one drains and exits 0. */
    sigset_t set;
    sup_signals(&set);
    sigprocmask(SIG_UNBLOCK, &set, NULL);
    /* A stop during the wait ends the worker without it ever listening (on_signal drains
     * nothing, the modules close, the loop below ends). */
    await_startup_loads();
    if (!stopping) {
        int rc = http_server_start_fd(loop, listen_fd);
        if (rc != 0) {
            log_error("listen on %s:%d: %s", cfg.host, cfg.port, uv_strerror(rc));
            return 1;
        }
        if (metrics_fd >= 0 && (rc = http_server_listen_only(loop, metrics_fd, "/metrics")) != 0) {
            log_error("METRICS_PORT: listen on %s:%d: %s", cfg.metrics_host, cfg.metrics_port,
                      uv_strerror(rc));
            return 1;
        }
        log_info("worker %d listening on %s:%d", (int)getpid(), cfg.host, cfg.port);
        if (slot_ready) __atomic_store_n(&slot_ready[slot], 1, __ATOMIC_RELEASE);
    }
    uv_run(loop, UV_RUN_DEFAULT);
    if (bound_started) uv_close((uv_handle_t *)&abort_bound, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    uv_loop_close(loop);
    if (worker_status == 0)
        log_info("worker %d stopped", (int)getpid());
    else
        log_error("worker %d stopped (exit status %d)", (int)getpid(), worker_status);
    return worker_status;
}

/* ---- supervisor ---- */

static pid_t spawn_worker(int slot, const int *fds, int n)
{
    pid_t parent = getpid();
    __atomic_store_n(&slot_ready[slot], 0, __ATOMIC_RELEASE);
    pid_t pid = fork();
    if (pid == 0) {
        /* A worker must not outlive its supervisor (killed with SIGKILL, say): it would keep
         * the port with nobody to replace or stop it. It drains and exits as on a SIGTERM. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != parent) _exit(1);
        for (int i = 0; i < n; i++)
            if (i != slot) close(fds[i]);
        metrics_adopt_slot(slot);
        int rc = run_worker(slot, fds[slot]);
        log_flush(); /* _exit runs no atexit handler */
        _exit(rc);
    }
    if (pid < 0) log_error("fork: %s", strerror(errno));
    return pid;
}

/* What /metrics needs from the supervisor, made before the first fork so that every worker, and
 * every replacement, inherits it: the shared slots where workers publish their figures
 * (core/metrics.h), and METRICS_PORT's socket. That is one socket all workers accept on, so a
 * scrape is answered as long as any worker lives; it stays open while a worker is replaced. */
static int sup_metrics_setup(int n)
{
    if (metrics_shm_init(n) != 0) return -1;
    if (!cfg.metrics_port) return 0;
    int rc = http_listen_socket_exclusive(cfg.metrics_host, cfg.metrics_port, &metrics_fd);
    if (rc != 0) {
        log_error("METRICS_PORT: listen on %s:%d: %s", cfg.metrics_host, cfg.metrics_port,
                  uv_strerror(rc));
        return -1;
    }
    return 0;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The supervisor's per-slot state. */
typedef struct sup_slots {
    pid_t *pids;
    int *fds;
    int *start_failures; /* in a row, per slot */
    uint64_t *spawn_at;  /* backoff after a failed start */
} sup_slots_t;

static int supervise_slots(int n, sup_slots_t *s);

/* Owns the per-slot arrays, so that every way out of supervise_slots frees them. */
static int supervise(int n)
{
    sup_slots_t s = {calloc((size_t)n, sizeof(pid_t)), calloc((size_t)n, sizeof(int)),
                     calloc((size_t)n, sizeof(int)), calloc((size_t)n, sizeof(uint64_t))};
    slot_ready = mmap(NULL, (size_t)n * sizeof(int), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int rc = 1;
    if (!s.pids || !s.fds || !s.start_failures || !s.spawn_at || slot_ready == MAP_FAILED)
        log_error("supervisor: out of memory");
    else
        rc = supervise_slots(n, &s);
    free(s.pids);
    free(s.fds);
    free(s.start_failures);
    free(s.spawn_at);
    return rc;
}

static int supervise_slots(int n, sup_slots_t *s)
{
    pid_t *pids = s->pids;
    int *fds = s->fds;
    int *start_failures = s->start_failures;
    uint64_t *spawn_at = s->spawn_at;
    /* One SO_REUSEPORT socket per slot: the kernel spreads connections over the slots, and a
     * slot's socket (with its backlog) outlives the worker that serves it. */
    for (int i = 0; i < n; i++) {
        int rc = http_listen_socket(cfg.host, cfg.port, &fds[i]);
        if (rc != 0) {
            log_error("listen on %s:%d: %s", cfg.host, cfg.port, uv_strerror(rc));
            while (i-- > 0)
                close(fds[i]);
            return 1;
        }
    }
    if (sup_metrics_setup(n) != 0) {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        return 1;
    }
    sigset_t set;
    sup_signals(&set);
    sigprocmask(SIG_BLOCK, &set, NULL);
    for (int i = 0; i < n; i++)
        pids[i] = spawn_worker(i, fds, n);
    time_t last_restart = 0;
    int restarts = 0;
    bool stop = false, give_up = false;
    while (!stop) {
        /* Reap and replace every worker that is gone (also one that could not be forked). */
        int status;
        pid_t pid;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int i = 0; i < n; i++) {
                if (pids[i] != pid) continue;
                pids[i] = 0;
                metrics_worker_restarts++; /* inherited by the replacement forked below */
                char how[64];
                if (WIFSIGNALED(status))
                    snprintf(how, sizeof(how), "killed by signal %d", WTERMSIG(status));
                else
                    snprintf(how, sizeof(how), "exited (status %d)", WEXITSTATUS(status));
                if (__atomic_load_n(&slot_ready[i], __ATOMIC_ACQUIRE)) {
                    /* It served: a crash, replaced at once. */
                    start_failures[i] = 0;
                    log_error("worker %d %s; restarting", (int)pid, how);
                    continue;
                }
                start_failures[i]++;
                if (start_failures[i] >= WORKER_START_TRIES) {
                    log_error("worker %d %s before it was ready: %d failed starts in a row; "
                              "stopping (see the worker's messages above)",
                              (int)pid, how, start_failures[i]);
                    give_up = true;
                } else {
                    log_error("worker %d %s before it was ready (failed start %d of %d); "
                              "restarting",
                              (int)pid, how, start_failures[i], WORKER_START_TRIES);
                    spawn_at[i] = mono_ms() + 500 * (uint64_t)start_failures[i];
                }
            }
        }
        if (give_up) break;
        /* A stop asked for meanwhile (Ctrl-C reaches the workers too) wins over a restart. */
        sigset_t pending;
        sigpending(&pending);
        if (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGINT)) break;
        for (int i = 0; i < n; i++) {
            if (pids[i] > 0 || mono_ms() < spawn_at[i]) continue;
            /* Crash loops get slowed down rather than spinning the CPU. */
            time_t now = time(NULL);
            restarts = now - last_restart < 5 ? restarts + 1 : 0;
            last_restart = now;
            if (restarts > 3) {
                struct timespec ts = {1, 0};
                nanosleep(&ts, NULL);
            }
            pids[i] = spawn_worker(i, fds, n);
        }
        struct timespec wait = {0, 200 * 1000 * 1000};
        int sig = sigtimedwait(&set, NULL, &wait);
        if (sig == SIGTERM || sig == SIGINT) stop = true;
    }
    /* Stop taking connections at once; the workers drain what they hold. */
    for (int i = 0; i < n; i++)
        close(fds[i]);
    if (metrics_fd >= 0) close(metrics_fd);
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) kill(pids[i], SIGTERM);
    int rc = give_up ? 1 : 0;
    for (int i = 0; i < n; i++) {
        if (pids[i] <= 0) continue;
        int status;
        while (waitpid(pids[i], &status, 0) < 0 && errno == EINTR) {
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
    }
    if (rc != 0 && !give_up) log_error("supervisor: a worker did not stop cleanly; exit status 1");
    return rc;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int main(int argc, char **argv)
{
    const char *cmd = argc > 1 ? argv[1] : "serve";
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "version") == 0) {
        printf("coachd %s\n", COACHD_VERSION);
        return 0;
    }
    if (strcmp(cmd, "first-run") == 0) return cli_first_run(argc - 1, argv + 1);
    if (strcmp(cmd, "seed-demo") == 0) return cli_seed_demo(argc - 1, argv + 1);
    if (strcmp(cmd, "end-sessions") == 0) return cli_end_sessions(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") != 0 && strcmp(cmd, "migrate") != 0) {
        fprintf(stderr, "usage: coachd [serve|migrate|first-run|seed-demo|end-sessions|version]\n");
        return 2;
    }
    if (config_load() != 0) return 1;
    if (!cfg.database_url) {
        log_error("DATABASE_URL is not set");
        return 1;
    }
    if (db_migrate(cfg.database_url) != 0) return 1;
    if (strcmp(cmd, "migrate") == 0) return 0;
    if (!cfg.redis_url) {
        log_error("REDIS_URL is not set");
        return 1;
    }
    raise_nofile();
    if (storage_dir_create() != 0) return 1;
    return supervise(cfg.workers < 1 ? 1 : cfg.workers);
}

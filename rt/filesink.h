/*
 * Files of the development sinks (rt/mail.c's .eml messages, rt/push.c's .json batches): one
 * whole file written into a folder without blocking the loop.
 *
 * The bytes go to a hidden temporary name "dir/.<name>.tmp" (created with O_EXCL), which is then
 * renamed to "dir/<name>", so a reader listing the folder never sees half a file; on any failure
 * (a write error reported only at close included) the temporary file is removed. A folder removed
 * while the server runs is made again (in the thread pool) and the file written. Every step is a
 * uv_fs_* request (libuv's thread pool). Names are
 * "<unix ms>-<16 random hex digits><ext>", so they sort by time and never collide.
 */
#pragma once
#include <stddef.h>
#include <uv.h>

/* The callback's rc on failure. */
#define FILESINK_EOPEN (-1)  /* the temporary file could not be created */
#define FILESINK_EWRITE (-2) /* writing or renaming it failed (it is removed) */

/* rc 0 (the file is in place) or FILESINK_EOPEN / FILESINK_EWRITE. */
typedef void (*filesink_cb)(int rc, void *data);

/* mkdir -p (0755). Synchronous: for start-up, before the loop runs. 0 when dir is a folder
 * afterwards, or -1 with errno set (ENOTDIR: a file of that name is there). */
int filesink_mkdir(const char *dir);

/* Writes bytes[0..len), which must stay valid until cb, to a new file of `dir` ending in `ext`
 * (".eml"). Failures are logged as "<label>: open|write|rename <path>: <reason>", the file
 * written at debug level. Returns 0, and cb then fires exactly once, from the loop (never inside
 * this call); or a negative uv error when the write could not start, and cb never fires. */
int filesink_write(uv_loop_t *loop, const char *label, const char *dir, const char *ext,
                   const char *bytes, size_t len, filesink_cb cb, void *data);

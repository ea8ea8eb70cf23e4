/*
 * rt/filesink: a file written whole into a folder through uv_fs (temporary name, then rename),
 * the callback once and never inside the call, the unique names, a short write continued, and
 * the failures (no folder; a write that fails half-way, forced with RLIMIT_FSIZE) leaving
 * nothing behind. Also filesink_mkdir.
 */
#include <regex.h>
#include <sys/resource.h>

#include "helpers.h"
#include "rt/filesink.h"

typedef struct box {
    volatile bool done;
    int calls, rc;
} box_t;

static void on_written(int rc, void *data)
{
    box_t *b = data;

    b->calls++;
    b->rc = rc;
    b->done = true;
}

/* Writes bytes[0..len) into dir and runs the loop until the callback; its rc. */
static int write_and_wait(const char *dir, const char *ext, const char *bytes, size_t len)
{
    box_t b = {0};

    assert_int_equal(filesink_write(&loop, "test", dir, ext, bytes, len, on_written, &b), 0);
    assert_int_equal(b.calls, 0); /* never inside the call */
    assert_true(run_until(&b.done, 10000));
    run_for(20);
    assert_int_equal(b.calls, 1);
    return b.rc;
}

/* The name of the only entry of dir (hidden ones included), heap; NULL when not exactly one. */
static char *only_entry(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char *name = NULL;
    int n = 0;

    if (!d) return NULL;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        n++;
        free(name);
        name = strdup(e->d_name);
    }
    closedir(d);
    if (n != 1) {
        free(name);
        return NULL;
    }
    return name;
}

static int entries(const char *dir)
{
    return count_files(dir, "") - 2; /* "." and ".." */
}

static void test_mkdir(void **state)
{
    char *dir = make_tmpdir(), *deep = path_join(dir, "a/b/c"), *file = path_join(dir, "f");
    char *under = path_join(file, "x");
    struct stat st;
    FILE *f;

    (void)state;
    assert_int_equal(filesink_mkdir(deep), 0);
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(filesink_mkdir(deep), 0); /* already there */
    f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    errno = 0;
    assert_int_equal(filesink_mkdir(under), -1); /* below a regular file */
    assert_int_equal(errno, ENOTDIR);
    rm_rf(dir);
    free(dir);
    free(deep);
    free(file);
    free(under);
}

static void test_write(void **state)
{
    char *dir = make_tmpdir(), *name, *path, *text;
    regex_t re;

    (void)state;
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(write_and_wait(dir, ".txt", "héllo\r\n", 8), 0);
    name = only_entry(dir);
    assert_non_null(name);
    assert_int_equal(regcomp(&re, "^[0-9]{13,}-[0-9a-f]{16}\\.txt$", REG_EXTENDED | REG_NOSUB), 0);
    assert_int_equal(regexec(&re, name, 0, NULL, 0), 0);
    regfree(&re);
    path = path_join(dir, name);
    text = read_file(path);
    assert_string_equal(text, "héllo\r\n");
    free(text);
    free(path);
    free(name);
    /* written in the same millisecond, still one file each */
    assert_int_equal(write_and_wait(dir, ".txt", "a", 1), 0);
    assert_int_equal(write_and_wait(dir, ".txt", "b", 1), 0);
    assert_int_equal(count_files(dir, ".txt"), 3);
    assert_int_equal(entries(dir), 3); /* no temporary file left */
    /* an empty file */
    assert_int_equal(write_and_wait(dir, ".eml", "", 0), 0);
    assert_int_equal(count_files(dir, ".eml"), 1);
    loop_finish();
    rm_rf(dir);
    free(dir);
}

static void test_large_write(void **state)
{
    size_t n = 6 * 1024 * 1024 + 7;
    char *dir = make_tmpdir(), *bytes = malloc(n + 1), *name, *path, *text;

    (void)state;
    for (size_t i = 0; i < n; i++)
        bytes[i] = (char)('a' + i % 23);
    bytes[n] = '\0';
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(write_and_wait(dir, ".json", bytes, n), 0);
    name = only_entry(dir);
    assert_non_null(name);
    path = path_join(dir, name);
    text = read_file(path);
    assert_true(text && strlen(text) == n && memcmp(text, bytes, n) == 0);
    free(text);
    free(path);
    free(name);
    loop_finish();
    rm_rf(dir);
    free(dir);
    free(bytes);
}

/* The folder removed while the server runs is made again and the file written; a file where
 * the folder should be fails the write (nothing is left) and is refused by filesink_mkdir. */
static void test_no_folder(void **state)
{
    char *dir = make_tmpdir(), *missing = path_join(dir, "missing");
    char *deeper = path_join(missing, "deeper");

    (void)state;
    assert_int_equal(loop_begin(), 0);
    assert_int_equal(write_and_wait(deeper, ".eml", "x", 1), 0);
    assert_int_equal(entries(deeper), 1);
    rm_rf(missing);
    FILE *f = fopen(missing, "w"); /* a file in the folder's place */
    assert_non_null(f);
    fclose(f);
    assert_int_equal(write_and_wait(missing, ".eml", "x", 1), FILESINK_EOPEN);
    assert_int_equal(write_and_wait(deeper, ".eml", "x", 1), FILESINK_EOPEN);
    errno = 0;
    assert_int_equal(filesink_mkdir(missing), -1);
    assert_int_equal(errno, ENOTDIR);
    assert_int_equal(entries(dir), 1); /* only that file */
    loop_finish();
    rm_rf(dir);
    free(dir);
    free(missing);
    free(deeper);
}

/* Files may grow to 1000 bytes: a write of 5000 writes 1000 (a short write, continued), then
 * fails with EFBIG; the temporary file is removed and nothing appears. */
static void test_write_fails_half_way(void **state)
{
    char *dir = make_tmpdir(), bytes[5000];
    struct rlimit old, lim;
    void (*old_handler)(int);

    (void)state;
    memset(bytes, 'x', sizeof(bytes));
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1000;
    old_handler = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    assert_int_equal(loop_begin(), 0);
    int rc = write_and_wait(dir, ".json", bytes, sizeof(bytes));
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(rc, FILESINK_EWRITE);
    assert_int_equal(entries(dir), 0);
    /* and the next write, within the limit again, works */
    assert_int_equal(write_and_wait(dir, ".json", bytes, sizeof(bytes)), 0);
    assert_int_equal(count_files(dir, ".json"), 1);
    assert_int_equal(entries(dir), 1);
    loop_finish();
    rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mkdir),
        cmocka_unit_test(test_write),
        cmocka_unit_test(test_large_write),
        cmocka_unit_test(test_no_folder),
        cmocka_unit_test(test_write_fails_half_way),
    };

    return cmocka_run_group_tests_name("rt_filesink", tests, NULL, NULL);
}

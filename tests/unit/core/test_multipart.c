/*
 * Unit tests for core/multipart: every body is parsed whole, byte by byte and split at every
 * position into two pieces, and all three must give the same events (boundaries split across
 * reads). Covers quoted and unquoted boundaries, CRLF and partial delimiters inside data,
 * missing final boundary, fields before and after the file, filename* (RFC 5987), field and
 * header size limits, preamble and epilogue, and malformed input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/multipart.h"

/* Events as text: "F<name>=<value>|", "B<name>:<filename>:<type>|", data bytes as they come,
 * then "E|" right after them at a file's end. */
typedef struct rec {
    char log[1 << 16];
    size_t len;
    int stop_at_data; /* a callback's stop value */
} rec_t;

static void put(rec_t *r, const char *s, size_t n)
{
    assert_true(r->len + n < sizeof(r->log));
    memcpy(r->log + r->len, s, n);
    r->len += n;
    r->log[r->len] = '\0';
}

static int on_field(void *ud, const char *name, const char *value, size_t len)
{
    rec_t *r = ud;
    put(r, "F", 1);
    put(r, name ? name : "(null)", strlen(name ? name : "(null)"));
    put(r, "=", 1);
    put(r, value, len);
    put(r, "|", 1);
    return 0;
}

static int on_file_begin(void *ud, const multipart_part_t *p)
{
    rec_t *r = ud;
    char b[1024];
    int n = snprintf(b, sizeof b, "B%s:%s:%s|", p->name ? p->name : "(null)", p->filename,
                     p->content_type ? p->content_type : "(null)");
    put(r, b, (size_t)n);
    return 0;
}

static int on_file_data(void *ud, const char *data, size_t len)
{
    rec_t *r = ud;
    put(r, data, len);
    return r->stop_at_data;
}

static int on_file_end(void *ud)
{
    put(ud, "E|", 2);
    return 0;
}

static const multipart_handler_t H = {on_field, on_file_begin, on_file_data, on_file_end};

/* Parses body fed in pieces of `step` bytes (0: whole); returns the first non-zero code of feed
 * or finish, with the event log in *r. */
static int parse_step(const char *ct, const char *body, size_t n, size_t step, rec_t *r)
{
    static multipart_t m;
    memset(r, 0, sizeof(*r));
    int rc = multipart_init(&m, ct, &H, r);
    if (rc != 0) return rc;
    if (step == 0) step = n ? n : 1;
    for (size_t off = 0; off < n; off += step) {
        size_t k = n - off < step ? n - off : step;
        rc = multipart_feed(&m, body + off, k);
        if (rc != 0) return rc;
    }
    return multipart_finish(&m);
}

/* Whole, byte by byte and every two-piece split agree; returns the code, log in out. */
static int parse_all(const char *ct, const char *body, size_t n, char *out, size_t outsz)
{
    static rec_t whole, other;
    int rc = parse_step(ct, body, n, 0, &whole);
    int rc2 = parse_step(ct, body, n, 1, &other);
    assert_int_equal(rc, rc2);
    assert_string_equal(whole.log, other.log);
    static multipart_t m;
    for (size_t cut = 0; cut <= n; cut++) {
        memset(&other, 0, sizeof(other));
        int r = multipart_init(&m, ct, &H, &other);
        assert_int_equal(r, 0);
        r = multipart_feed(&m, body, cut);
        if (r == 0) r = multipart_feed(&m, body + cut, n - cut);
        if (r == 0) r = multipart_finish(&m);
        assert_int_equal(r, rc);
        assert_string_equal(whole.log, other.log);
    }
    size_t k = whole.len < outsz - 1 ? whole.len : outsz - 1;
    memcpy(out, whole.log, k);
    out[k] = '\0';
    return rc;
}

#define CT "multipart/form-data; boundary=XyZ"

static void test_file_and_fields(void **state)
{
    (void)state;
    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"prefix\"\r\n\r\n"
        "docs\r\n"
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
        "Content-Type: text/plain\r\n\r\n"
        "line1\r\nline2\r\n--Xy not a boundary\r\n-\r\n--XyQ\r\n"
        "--XyZ\r\n"
        "content-disposition: form-data; name=target\r\n\r\n"
        "avatar\r\n"
        "--XyZ--\r\n";
    char out[4096];
    assert_int_equal(parse_all(CT, body, sizeof(body) - 1, out, sizeof out), 0);
    assert_string_equal(out,
                        "Fprefix=docs|Bfile:a.txt:text/plain|"
                        "line1\r\nline2\r\n--Xy not a boundary\r\n-\r\n--XyQE|Ftarget=avatar|");
}

static void test_quoted_boundary_and_preamble(void **state)
{
    (void)state;
    static const char body[] =
        "preamble text\r\n--a b:c?\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n\r\n"
        "\r\n\r\n--a b:c?\r\n"
        "Content-Disposition: form-data; name=\"f\"\r\n\r\n"
        "\r\n--a b:c?--  \r\nepilogue --a b:c?\r\n";
    char out[4096];
    assert_int_equal(parse_all("Multipart/Form-Data ; charset=utf-8; boundary=\"a b:c?\"", body,
                               sizeof(body) - 1, out, sizeof out),
                     0);
    assert_string_equal(out, "Bfile:x:(null)|\r\nE|Ff=|");
}

static void test_empty_file_and_empty_headers(void **state)
{
    (void)state;
    static const char body[] = "--XyZ\r\n"
                               "Content-Disposition: form-data; name=\"file\"; filename=\"\"\r\n"
                               "Content-Type: application/octet-stream\r\n\r\n"
                               "\r\n--XyZ\r\n"
                               "\r\n"
                               "no headers\r\n--XyZ--";
    char out[4096];
    assert_int_equal(parse_all(CT, body, sizeof(body) - 1, out, sizeof out), 0);
    assert_string_equal(out, "Bfile::application/octet-stream|E|F(null)=no headers|");
}

static void test_missing_final_boundary(void **state)
{
    (void)state;
    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"
        "data that never ends\r\n--Xy";
    char out[4096];
    assert_int_equal(parse_all(CT, body, sizeof(body) - 1, out, sizeof out), MULTIPART_ETRUNCATED);
    /* The partial delimiter at the end was never given out as data. */
    assert_string_equal(out, "Bfile:a:(null)|data that never ends");
    static const char only_open[] = "--XyZ\r\n";
    assert_int_equal(parse_all(CT, only_open, sizeof(only_open) - 1, out, sizeof out),
                     MULTIPART_ETRUNCATED);
    assert_int_equal(parse_all(CT, "", 0, out, sizeof out), MULTIPART_ETRUNCATED);
    /* A boundary line without the final "--" after the last part. */
    static const char no_dashes[] = "--XyZ\r\n"
                                    "Content-Disposition: form-data; name=\"a\"\r\n\r\n"
                                    "1\r\n--XyZ\r\n";
    assert_int_equal(parse_all(CT, no_dashes, sizeof(no_dashes) - 1, out, sizeof out),
                     MULTIPART_ETRUNCATED);
    assert_string_equal(out, "Fa=1|");
}

static void test_filename_star(void **state)
{
    (void)state;
    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"fallback.txt\";"
        " filename*=UTF-8''r%C3%A9sum%C3%A9%20final.txt\r\n\r\n"
        "x\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file2\"; filename*=iso-8859-1'es'ni%F1o.txt\r\n\r\n"
        "y\r\n--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file3\"; filename=\"C:\\Users\\me\\a "
        "\\\"q\\\".txt\";"
        " filename*=koi8-r''%C1\r\n\r\n"
        "z\r\n--XyZ--\r\n";
    char out[4096];
    assert_int_equal(parse_all(CT, body, sizeof(body) - 1, out, sizeof out), 0);
    assert_string_equal(out, "Bfile:résumé final.txt:(null)|xE|"
                             "Bfile2:niño.txt:(null)|yE|"
                             "Bfile3:a \"q\".txt:(null)|zE|");
}

static void test_field_size_limit(void **state)
{
    (void)state;
    static char body[MULTIPART_FIELD_MAX * 2 + 256];
    char out[MULTIPART_FIELD_MAX * 2 + 256];
    rec_t *r = malloc(sizeof(rec_t));
    int n = snprintf(body, sizeof body,
                     "--XyZ\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n%0*d\r\n--XyZ--",
                     MULTIPART_FIELD_MAX, 0);
    assert_int_equal(parse_step(CT, body, (size_t)n, 7, r), 0);
    n = snprintf(body, sizeof body,
                 "--XyZ\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n%0*d\r\n--XyZ--",
                 MULTIPART_FIELD_MAX + 1, 0);
    assert_int_equal(parse_step(CT, body, (size_t)n, 7, r), MULTIPART_EFIELD);
    assert_int_equal(parse_step(CT, body, (size_t)n, 1, r), MULTIPART_EFIELD);
    /* A file part of the same size is not limited by the parser. */
    n = snprintf(body, sizeof body,
                 "--XyZ\r\nContent-Disposition: form-data; name=\"f\"; filename=\"a\"\r\n\r\n"
                 "%0*d\r\n--XyZ--",
                 MULTIPART_FIELD_MAX * 2, 0);
    assert_int_equal(parse_step(CT, body, (size_t)n, 13, r), 0);
    (void)out;
    free(r);
}

static void test_header_size_limit(void **state)
{
    (void)state;
    size_t cap = MULTIPART_HEADER_MAX + 256;
    char *body = malloc(cap);
    rec_t *r = malloc(sizeof(rec_t));
    int n = snprintf(body, cap,
                     "--XyZ\r\nContent-Disposition: form-data; name=\"%0*d\"\r\n\r\nv\r\n--XyZ--",
                     MULTIPART_HEADER_MAX, 0);
    assert_int_equal(parse_step(CT, body, (size_t)n, 100, r), MULTIPART_EHEADER);
    free(body);
    free(r);
}

static void test_malformed(void **state)
{
    (void)state;
    char out[4096];
    static const char bad_tail[] = "--XyZ?\r\n\r\nx\r\n--XyZ--";
    assert_int_equal(parse_all(CT, bad_tail, sizeof(bad_tail) - 1, out, sizeof out),
                     MULTIPART_EPARSE);
    static const char no_colon[] = "--XyZ\r\nbroken header\r\n\r\nx\r\n--XyZ--";
    assert_int_equal(parse_all(CT, no_colon, sizeof(no_colon) - 1, out, sizeof out),
                     MULTIPART_EPARSE);
    static const char bad_cd[] =
        "--XyZ\r\nContent-Disposition: form-data; name=\"x\r\n\r\nx\r\n--XyZ--";
    assert_int_equal(parse_all(CT, bad_cd, sizeof(bad_cd) - 1, out, sizeof out), MULTIPART_EPARSE);
}

static void test_content_types(void **state)
{
    (void)state;
    multipart_t *m = malloc(sizeof(*m));
    assert_int_equal(multipart_init(m, "multipart/form-data; boundary=abc", &H, NULL), 0);
    assert_int_equal(multipart_init(m, "multipart/form-data;boundary=\"abc\"", &H, NULL), 0);
    assert_int_equal(multipart_init(m, "multipart/form-data", &H, NULL), MULTIPART_EINVAL);
    assert_int_equal(multipart_init(m, "multipart/form-data; boundary=", &H, NULL),
                     MULTIPART_EINVAL);
    assert_int_equal(multipart_init(m, "multipart/form-data; boundary=\"abc", &H, NULL),
                     MULTIPART_EINVAL);
    assert_int_equal(multipart_init(m, "multipart/form-data; boundary=\"ab\x01\"", &H, NULL),
                     MULTIPART_EINVAL);
    assert_int_equal(multipart_init(m, "multipart/form-data; boundary=\"abc \"", &H, NULL),
                     MULTIPART_EINVAL);
    assert_int_equal(multipart_init(m, "application/json", &H, NULL), MULTIPART_EINVAL);
    assert_int_equal(multipart_init(m, NULL, &H, NULL), MULTIPART_EINVAL);
    char longb[100];
    memset(longb, 'a', 71);
    longb[71] = '\0';
    char ct[200];
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", longb);
    assert_int_equal(multipart_init(m, ct, &H, NULL), MULTIPART_EINVAL);
    longb[70] = '\0';
    snprintf(ct, sizeof ct, "multipart/form-data; boundary=%s", longb);
    assert_int_equal(multipart_init(m, ct, &H, NULL), 0);
    /* A failed init leaves the parser failed. */
    assert_int_equal(multipart_init(m, "text/plain", &H, NULL), MULTIPART_EINVAL);
    assert_int_equal(multipart_feed(m, "x", 1), MULTIPART_EINVAL);
    free(m);
}

static void test_callback_stops(void **state)
{
    (void)state;
    static const char body[] =
        "--XyZ\r\n"
        "Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"
        "abc\r\n--XyZ--";
    rec_t *r = calloc(1, sizeof(rec_t));
    multipart_t *m = malloc(sizeof(*m));
    r->stop_at_data = 7;
    assert_int_equal(multipart_init(m, CT, &H, r), 0);
    assert_int_equal(multipart_feed(m, body, sizeof(body) - 1), 7);
    assert_int_equal(multipart_feed(m, "x", 1), 7);
    assert_int_equal(multipart_finish(m), 7);
    free(r);
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_and_fields),
        cmocka_unit_test(test_quoted_boundary_and_preamble),
        cmocka_unit_test(test_empty_file_and_empty_headers),
        cmocka_unit_test(test_missing_final_boundary),
        cmocka_unit_test(test_filename_star),
        cmocka_unit_test(test_field_size_limit),
        cmocka_unit_test(test_header_size_limit),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_content_types),
        cmocka_unit_test(test_callback_stops),
    };
    return cmocka_run_group_tests_name("core/multipart", tests, NULL, NULL);
}

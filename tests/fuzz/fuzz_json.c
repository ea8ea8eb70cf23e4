/*
 * JSON request bodies: jansson with the flags of core/json.c, our field readers, the validators
 * routes apply to string fields (domain/validate.c, domain/text.c), and our JSON string escaper
 * (core/buf.c) that renders values back. Oracle: every string value, escaped by buf_json_strn
 * and parsed again, is the same string when it is valid UTF-8 (jansson only yields valid UTF-8).
 */
#include <jansson.h>
#include <stdio.h>

#include "core/buf.h"
#include "core/json.h"
#include "domain/text.h"
#include "domain/validate.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const keys[] = {"email",     "password", "name",     "callbackURL",
                                   "role",      "status",   "timezone", "country",
                                   "birthDate", "lang",     "limit",    ""};

static void check_string(const char *s, size_t n)
{
    FUZZ_CHECK(text_utf8_valid(s, n));
    buf_t b = BUF_INIT;
    buf_json_strn(&b, s, n);
    json_error_t err;
    json_t *back = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    FUZZ_CHECK(back && json_is_string(back));
    FUZZ_CHECK(json_string_length(back) == n && memcmp(json_string_value(back), s, n) == 0);
    json_decref(back);
    buf_free(&b);

    char low[320];
    (void)validate_is_email(s);
    (void)validate_email_lower(s, low, sizeof(low));
    size_t off, len;
    if (validate_name(s, n, &off, &len) == 0) FUZZ_CHECK(off + len <= n);
    if (validate_trimmed(s, n, 1, 200, &off, &len) == 0) FUZZ_CHECK(off + len <= n);
    (void)validate_is_lang(s);
    (void)validate_accept_language(s);
    (void)validate_is_date(s);
    (void)validate_is_country(s);
    char cc[3];
    (void)validate_country_upper(s, cc);
    (void)validate_is_timezone(s);
    int iv;
    (void)validate_int(s, -1000, 1000, &iv);
    (void)text_cp_count(s, n);
    FUZZ_CHECK(text_truncate(s, n, 10) <= n);
    (void)text_has_control(s, n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_error_t err;
    json_t *root = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &err);
    if (!root) return 0;
    if (json_is_object(root)) {
        for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
            const char *s = json_get_str(root, keys[i]);
            FUZZ_CHECK(!s || json_has(root, keys[i]));
            if (s) check_string(s, json_string_length(json_object_get(root, keys[i])));
        }
        const char *k;
        json_t *v;
        json_object_foreach(root, k, v)
        {
            if (json_is_string(v)) check_string(json_string_value(v), json_string_length(v));
        }
    } else if (json_is_string(root)) {
        check_string(json_string_value(root), json_string_length(root));
    }
    json_decref(root);
    return 0;
}

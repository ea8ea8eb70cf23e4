/*
 * domain/urlcheck.c: callbackURL / redirectTo and Origin checks. Fields: [0] the URL, [1..3]
 * trusted origins. Oracles: an allowed absolute URL has an origin equal to one of the trusted
 * ones (normalized); an allowed URL is relative or absolute, never "//host" or "/\host"; the
 * normalized origin is idempotent.
 */
#include <stdio.h>

#include "domain/urlcheck.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fields_t f;
    fuzz_split(&f, data, size, 4);
    const char *url = f.s[0];
    const char *origins[3] = {f.s[1], f.s[2], f.s[3]};

    bool rel = urlcheck_is_relative(url);
    if (rel) {
        FUZZ_CHECK(url[0] == '/' && url[1] != '/' && url[1] != '\\');
        FUZZ_CHECK(strchr(url, '\\') == NULL);
    }
    char o[URLCHECK_ORIGIN_MAX], o2[URLCHECK_ORIGIN_MAX];
    int rc = urlcheck_origin(url, o, sizeof(o));
    if (rc == 0) {
        FUZZ_CHECK(strlen(o) < sizeof(o));
        FUZZ_CHECK(strncmp(o, "http://", 7) == 0 || strncmp(o, "https://", 8) == 0);
        FUZZ_CHECK(urlcheck_origin(o, o2, sizeof(o2)) == 0 && strcmp(o, o2) == 0);
        FUZZ_CHECK(strchr(o, '@') == NULL && strchr(o, '\\') == NULL);
    }
    bool allowed = urlcheck_is_allowed(url, origins, 3);
    if (allowed && !rel) {
        FUZZ_CHECK(rc == 0);
        bool found = false;
        for (int i = 0; i < 3; i++)
            if (urlcheck_origin(origins[i], o2, sizeof(o2)) == 0 && strcmp(o, o2) == 0)
                found = true;
        FUZZ_CHECK(found);
    }
    if (urlcheck_origin_trusted(url, origins, 3)) FUZZ_CHECK(rc == 0);
    const char *lang = urlcheck_lang(url);
    if (lang) FUZZ_CHECK(strcmp(lang, "en") == 0 || strcmp(lang, "es") == 0);
    fuzz_fields_free(&f);
    return 0;
}

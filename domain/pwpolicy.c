/* Password choice rules (see pwpolicy.h). */
#include "domain/pwpolicy.h"

#include <stdlib.h>
#include <string.h>

#include "domain/text.h"

/* Generated from domain/wordlists/common_passwords.txt (embed_wordlist.py): lower-case,
 * sorted by byte value, no duplicates. */
extern const char *const common_passwords[];
extern const size_t common_passwords_n;

/* Lower-cases ASCII A..Z and the UTF-8 encodings of U+00C0..U+00DE but U+00D7 (the Latin-1
 * capitals, two bytes C3 80..C3 9E) in place; the length never changes. */
static void fold(char *s, size_t n)
{
    unsigned char *p = (unsigned char *)s;
    for (size_t i = 0; i < n; i++) {
        if (p[i] >= 'A' && p[i] <= 'Z') {
            p[i] = (unsigned char)(p[i] + 32);
        } else if (p[i] == 0xC3 && i + 1 < n && p[i + 1] >= 0x80 && p[i + 1] <= 0x9E &&
                   p[i + 1] != 0x97) {
            p[i + 1] = (unsigned char)(p[i + 1] + 0x20);
            i++;
        }
    }
}

static char *folded_copy(const char *s, size_t n)
{
    char *c = malloc(n + 1);
    if (c == NULL) abort();
    memcpy(c, s, n);
    c[n] = '\0';
    fold(c, n);
    return c;
}

static int cmp_word(const void *key, const void *elem)
{
    return strcmp((const char *)key, *(const char *const *)elem);
}

bool pwpolicy_is_common(const char *password)
{
    if (password == NULL) return false;
    char *f = folded_copy(password, strlen(password));
    bool hit = bsearch(f, common_passwords, common_passwords_n, sizeof(common_passwords[0]),
                       cmp_word) != NULL;
    free(f);
    return hit;
}

size_t pwpolicy_common_count(void)
{
    return common_passwords_n;
}

static bool contains(const char *hay, size_t hn, const char *needle, size_t nn)
{
    if (nn == 0 || nn > hn) return false;
    for (size_t i = 0; i + nn <= hn; i++)
        if (memcmp(hay + i, needle, nn) == 0) return true;
    return false;
}

static bool is_separator(unsigned char c)
{
    return c < 0x80 &&
           !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

/* True when the folded password pw[0..pn) contains the folded word w[0..wn) as a whole or one
 * of its parts between separators, counting only those of PWPOLICY_CONTEXT_MIN_CP or more
 * code points. */
static bool contains_word(const char *pw, size_t pn, const char *w, size_t wn)
{
    if (w == NULL || wn == 0) return false;
    char *f = folded_copy(w, wn);
    bool hit = false;
    if (text_utf8_valid(f, wn) && text_cp_count(f, wn) >= PWPOLICY_CONTEXT_MIN_CP)
        hit = contains(pw, pn, f, wn);
    for (size_t i = 0; !hit && i < wn;) {
        while (i < wn && is_separator((unsigned char)f[i]))
            i++;
        size_t start = i;
        while (i < wn && !is_separator((unsigned char)f[i]))
            i++;
        size_t len = i - start;
        if (len > 0 && len < wn && text_utf8_valid(f + start, len) &&
            text_cp_count(f + start, len) >= PWPOLICY_CONTEXT_MIN_CP)
            hit = contains(pw, pn, f + start, len);
    }
    free(f);
    return hit;
}

pwpolicy_rule_t pwpolicy_check(const char *password, const char *email, const char *first,
                               const char *last)
{
    if (password == NULL) return PWPOLICY_OK;
    if (pwpolicy_is_common(password)) return PWPOLICY_COMMON;
    size_t pn = strlen(password);
    char *pw = folded_copy(password, pn);
    pwpolicy_rule_t r = PWPOLICY_OK;
    if (contains(pw, pn, PWPOLICY_SERVICE_NAME, strlen(PWPOLICY_SERVICE_NAME))) {
        r = PWPOLICY_SERVICE;
    } else if (email != NULL) {
        const char *at = strrchr(email, '@');
        if (contains_word(pw, pn, email, at ? (size_t)(at - email) : strlen(email)))
            r = PWPOLICY_EMAIL;
    }
    if (r == PWPOLICY_OK && (contains_word(pw, pn, first, first ? strlen(first) : 0) ||
                             contains_word(pw, pn, last, last ? strlen(last) : 0)))
        r = PWPOLICY_NAME;
    free(pw);
    return r;
}

const char *pwpolicy_message(pwpolicy_rule_t rule)
{
    switch (rule) {
    case PWPOLICY_COMMON:
        return "is one of the 10,000 most common passwords; choose one that is harder to guess";
    case PWPOLICY_SERVICE:
        return "must not contain the name of the service (" PWPOLICY_SERVICE_NAME ")";
    case PWPOLICY_EMAIL:
        return "must not contain your email address or a part of it";
    case PWPOLICY_NAME:
        return "must not contain your first or last name";
    case PWPOLICY_OK:
        break;
    }
    return NULL;
}

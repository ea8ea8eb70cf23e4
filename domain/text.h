/*
 * UTF-8 text helpers for validation and previews. Lengths are counted in Unicode code points,
 * as docs/api.md requires. Nothing here allocates: trimming and truncation return spans into
 * the caller's text.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

/* Strict UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF. */
bool text_utf8_valid(const char *s, size_t n);
/* Number of code points in s[0..n); expects valid UTF-8 (counts lead bytes). */
size_t text_cp_count(const char *s, size_t n);
/* The span of s[0..n) without leading and trailing white space: ASCII space, \t \n \v \f \r
 * and the Unicode spaces JavaScript's trim() removes (U+00A0, U+1680, U+2000..U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000, U+FEFF). Sets *off and *len; an all-space text gives len 0. */
void text_trim(const char *s, size_t n, size_t *off, size_t *len);
/* Byte length of the longest prefix of s[0..n) holding at most max_cp code points; never
 * splits a character. No ellipsis is added (reply previews use 120, push bodies 200). */
size_t text_truncate(const char *s, size_t n, size_t max_cp);
/* True when s[0..n) holds a C0 control (U+0000..U+001F), DEL or a C1 control (U+0080..U+009F). */
bool text_has_control(const char *s, size_t n);
/* The ASCII fallback of s[0..n) for a quoted header parameter (Content-Disposition's
 * filename="..."): printable ASCII is kept except '"' and '\\'; every other character becomes
 * one '_' (a whole UTF-8 sequence, one code point, is one '_'; an invalid byte is one '_').
 * out holds n + 1 bytes; returns the length written (NUL-terminated). */
size_t text_ascii_fallback(const char *s, size_t n, char *out);

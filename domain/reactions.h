/*
 * Call reactions: the six emoji a participant may send during a video call
 * (👍 ❤️ 😂 🎉 👏 🙌). Matching is on exact UTF-8 bytes; the heart is accepted with
 * or without its variation selector (U+2764 U+FE0F or U+2764 alone) and always published in the
 * canonical form with U+FE0F.
 */
#pragma once
#include <stddef.h>

/* The canonical spelling (a static string) of an allowed reaction, or NULL. s need not be
 * NUL-terminated; n is its length in bytes. */
const char *reactions_canonical(const char *s, size_t n);

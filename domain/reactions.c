/* Call reactions (see reactions.h). */
#include "domain/reactions.h"

#include <string.h>

static const char *const allowed[] = {
    "\xF0\x9F\x91\x8D",         /* U+1F44D thumbs up */
    "\xE2\x9D\xA4\xEF\xB8\x8F", /* U+2764 U+FE0F red heart */
    "\xF0\x9F\x98\x82",         /* U+1F602 face with tears of joy */
    "\xF0\x9F\x8E\x89",         /* U+1F389 party popper */
    "\xF0\x9F\x91\x8F",         /* U+1F44F clapping hands */
    "\xF0\x9F\x99\x8C",         /* U+1F64C raising hands */
};

/* The heart without its variation selector, as many keyboards send it. */
static const char bare_heart[] = "\xE2\x9D\xA4";

const char *reactions_canonical(const char *s, size_t n)
{
    if (!s) return NULL;
    for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
        if (n == strlen(allowed[i]) && memcmp(s, allowed[i], n) == 0) return allowed[i];
    if (n == sizeof(bare_heart) - 1 && memcmp(s, bare_heart, n) == 0) return allowed[1];
    return NULL;
}

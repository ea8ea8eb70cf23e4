#include "core/random.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>

void random_bytes(void *out, size_t n)
{
    unsigned char *p = out;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            /* Without randomness no token is safe to issue. */
            perror("getrandom");
            abort();
        }
        p += r;
        n -= (size_t)r;
    }
}

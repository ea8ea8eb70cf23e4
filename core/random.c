#include "core/random.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/log.h"

void random_bytes(void *out, size_t n)
{
    unsigned char *p = out;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            /* Without randomness no token is safe to issue. */
            log_error("getrandom: %s", strerror(errno));
            abort();
        }
        p += r;
        n -= (size_t)r;
    }
}

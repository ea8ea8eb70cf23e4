/* Text for the domain error codes (domain/err.h). */
#include "domain/err.h"

const char *domain_strerror(int code)
{
    switch (code) {
    case 0:
        return "ok";
    case DOMAIN_EINVAL:
        return "invalid input";
    case DOMAIN_ENOSPC:
        return "output buffer too small";
    case DOMAIN_EMISMATCH:
        return "password mismatch";
    case DOMAIN_ETRANSITION:
        return "invalid transition";
    case DOMAIN_EINTERNAL:
        return "internal library failure";
    default:
        return "unknown error";
    }
}

/*
 * core/netaddr.c: TRUSTED_PROXIES lists and the client an X-Forwarded-For header names.
 * Fields: [0] a TRUSTED_PROXIES list, [1] an X-Forwarded-For value (NULs included).
 * Oracles: a picked client is an address in canonical text; appending a trusted proxy's
 * address (one more hop of ours) never changes an untrusted client; what stands left of an
 * untrusted client (the client's own claims, junk included) never changes it either.
 */
#include <stdio.h>

#include "core/netaddr.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_fields_t f;
    fuzz_split(&f, data, size, 2);
    netaddr_list_t l;
    char err[256];
    if (netaddr_list_parse(&l, f.s[0], err, sizeof(err)) != 0) {
        FUZZ_CHECK(l.n == 0 && l.v == NULL && err[0] != '\0');
        fuzz_fields_free(&f);
        return 0;
    }
    char out[NETADDR_TEXT_MAX];
    if (netaddr_pick_client(&l, f.s[1], f.len[1], out, sizeof(out))) {
        netaddr_t a;
        FUZZ_CHECK(netaddr_parse(out, strlen(out), &a));
        char again[NETADDR_TEXT_MAX];
        netaddr_format(&a, again, sizeof(again));
        FUZZ_CHECK(strcmp(again, out) == 0);
        if (!netaddr_list_match(&l, &a)) {
            size_t cap = f.len[1] + 2 * NETADDR_TEXT_MAX + 16;
            char *h = malloc(cap), other[NETADDR_TEXT_MAX];
            if (l.n) {
                char hop[NETADDR_TEXT_MAX];
                netaddr_format(&l.v[0].net, hop, sizeof(hop));
                memcpy(h, f.s[1], f.len[1]);
                size_t n = f.len[1] + (size_t)snprintf(h + f.len[1], cap - f.len[1], ", %s", hop);
                FUZZ_CHECK(netaddr_pick_client(&l, h, n, other, sizeof(other)));
                FUZZ_CHECK(strcmp(other, out) == 0);
            }
            memcpy(h, "junk ,", 6);
            memcpy(h + 6, f.s[1], f.len[1]);
            FUZZ_CHECK(netaddr_pick_client(&l, h, f.len[1] + 6, other, sizeof(other)));
            FUZZ_CHECK(strcmp(other, out) == 0);
            free(h);
        }
    }
    netaddr_list_free(&l);
    fuzz_fields_free(&f);
    return 0;
}

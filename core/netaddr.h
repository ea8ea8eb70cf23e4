/*
 * Client addresses behind reverse proxies: IPv4/IPv6 addresses and CIDR lists (TRUSTED_PROXIES),
 * and the client an X-Forwarded-For header names when it came from a trusted proxy.
 *
 * Every address is held as 16 bytes: IPv4 as its IPv4-mapped IPv6 form (::ffff:a.b.c.d) and an
 * IPv4 CIDR a.b.c.d/n as ::ffff:a.b.c.d/(96+n), so a peer that a dual-stack socket reports as
 * ::ffff:a.b.c.d matches the IPv4 entries that name it.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Longest textual address written (an IPv6 address, NUL included). */
#define NETADDR_TEXT_MAX 46

typedef struct netaddr {
    uint8_t b[16];
} netaddr_t;

typedef struct netaddr_cidr {
    netaddr_t net; /* host bits zero */
    unsigned bits; /* 0..128, counted on the 16-byte form */
} netaddr_cidr_t;

typedef struct netaddr_list {
    netaddr_cidr_t *v;
    size_t n;
} netaddr_list_t;

/* Parses one bare address of exactly len bytes (dotted IPv4 or IPv6 text; no port, brackets,
 * zone or surrounding space). */
bool netaddr_parse(const char *s, size_t len, netaddr_t *out);
/* Writes the canonical text of a (IPv4-mapped addresses as dotted IPv4) into out (at least
 * NETADDR_TEXT_MAX bytes). */
void netaddr_format(const netaddr_t *a, char *out, size_t outsz);

/* Parses "cidr[, cidr...]" (an entry: an address, or address/prefix; blanks around entries and
 * empty entries are ignored). A malformed entry, a prefix out of range or host bits set beyond
 * the prefix: -1 and a message naming the entry in err; l is then empty. */
int netaddr_list_parse(netaddr_list_t *l, const char *list, char *err, size_t errsz);
void netaddr_list_free(netaddr_list_t *l);
bool netaddr_list_match(const netaddr_list_t *l, const netaddr_t *a);

/*
 * The client of a request that a trusted proxy forwarded, from its X-Forwarded-For value (all
 * of the request's X-Forwarded-For lines joined with commas, in order): the right-most address
 * not in `trusted`, or when every one is trusted, the left-most. Entries left of the client are
 * the client's own claims and are never read. An entry that is not a bare address, met before
 * the client is found, makes the header unusable: false, and the caller keeps the peer's
 * address. On true, out (at least NETADDR_TEXT_MAX bytes) holds the canonical text.
 */
bool netaddr_pick_client(const netaddr_list_t *trusted, const char *xff, size_t len, char *out,
                         size_t outsz);

/* TRUSTED_PROXIES of this process: loaded once by config_load (NULL or "" = none). Returns -1
 * after logging a configuration error naming TRUSTED_PROXIES. */
int netaddr_trusted_load(const char *list);
const netaddr_list_t *netaddr_trusted(void);
/* True when the textual peer address (as the socket reports it) is in TRUSTED_PROXIES. */
bool netaddr_trusted_peer(const char *ip);

/*
 * Addresses, CIDR lists and the X-Forwarded-For client (netaddr.h). Parsing goes through
 * inet_pton, which takes only bare dotted-quad IPv4 (no octal or shortened forms) and IPv6
 * text: anything else in a header is junk, never an address.
 */
#include "core/netaddr.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/mem.h"

/* "ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255" is the longest text inet_pton takes. */
#define ADDR_TEXT_MAX 45

static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t';
}

bool netaddr_parse(const char *s, size_t len, netaddr_t *out)
{
    if (len == 0 || len > ADDR_TEXT_MAX || memchr(s, '\0', len)) return false;
    char text[ADDR_TEXT_MAX + 1];
    memcpy(text, s, len);
    text[len] = '\0';
    if (memchr(text, ':', len)) return inet_pton(AF_INET6, text, out->b) == 1;
    memcpy(out->b, v4_prefix, sizeof(v4_prefix));
    return inet_pton(AF_INET, text, out->b + 12) == 1;
}

static bool is_v4(const netaddr_t *a)
{
    return memcmp(a->b, v4_prefix, sizeof(v4_prefix)) == 0;
}

void netaddr_format(const netaddr_t *a, char *out, size_t outsz)
{
    const char *ok = is_v4(a) ? inet_ntop(AF_INET, a->b + 12, out, (socklen_t)outsz)
                              : inet_ntop(AF_INET6, a->b, out, (socklen_t)outsz);
    if (!ok && outsz) out[0] = '\0';
}

/* True when the first `bits` bits of a and b agree. */
static bool prefix_equal(const netaddr_t *a, const netaddr_t *b, unsigned bits)
{
    unsigned whole = bits / 8, rest = bits % 8;
    if (memcmp(a->b, b->b, whole) != 0) return false;
    if (rest == 0) return true;
    uint8_t mask = (uint8_t)(0xff << (8 - rest));
    return (a->b[whole] & mask) == (b->b[whole] & mask);
}

/* One entry of a list, already trimmed: address or address/prefix. */
static int cidr_parse(const char *s, size_t len, netaddr_cidr_t *out, char *err, size_t errsz)
{
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    if (!netaddr_parse(s, alen, &out->net)) {
        snprintf(err, errsz, "\"%.*s\" is not an IPv4 or IPv6 address", (int)alen, s);
        return -1;
    }
    unsigned width = is_v4(&out->net) && !memchr(s, ':', alen) ? 32 : 128;
    unsigned bits = width;
    if (slash) {
        const char *d = slash + 1;
        size_t dl = len - alen - 1;
        bits = 0;
        bool ok = dl > 0 && dl <= 3;
        for (size_t i = 0; ok && i < dl; i++) {
            if (d[i] < '0' || d[i] > '9') ok = false;
            bits = bits * 10 + (unsigned)(d[i] - '0');
        }
        if (!ok || bits > width) {
            snprintf(err, errsz, "\"%.*s\": the prefix length must be 0 to %u", (int)len, s, width);
            return -1;
        }
    }
    out->bits = width == 32 ? 96 + bits : bits;
    /* 10.0.0.1/8 is refused rather than read as 10.0.0.0/8: the operator may have meant /32. */
    netaddr_t masked = {{0}};
    unsigned whole = out->bits / 8, rest = out->bits % 8;
    memcpy(masked.b, out->net.b, whole);
    if (rest) masked.b[whole] = (uint8_t)(out->net.b[whole] & (0xff << (8 - rest)));
    if (memcmp(masked.b, out->net.b, sizeof(masked.b)) != 0) {
        char net[NETADDR_TEXT_MAX];
        netaddr_format(&masked, net, sizeof(net));
        snprintf(err, errsz, "\"%.*s\" has bits set beyond its prefix (the network is %s/%u)",
                 (int)len, s, net, width == 32 ? out->bits - 96 : out->bits);
        return -1;
    }
    return 0;
}

void netaddr_list_free(netaddr_list_t *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int netaddr_list_parse(netaddr_list_t *l, const char *list, char *err, size_t errsz)
{
    l->v = NULL;
    l->n = 0;
    size_t cap = 0;
    const char *p = list ? list : "";
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        const char *e = p;
        while (n && is_blank(*e))
            e++, n--;
        while (n && is_blank(e[n - 1]))
            n--;
        if (n) {
            if (l->n == cap) {
                cap = cap ? cap * 2 : 4;
                l->v = xrealloc(l->v, cap * sizeof(*l->v));
            }
            if (cidr_parse(e, n, &l->v[l->n], err, errsz) != 0) {
                netaddr_list_free(l);
                return -1;
            }
            l->n++;
        }
        if (!comma) break;
        p = comma + 1;
    }
    return 0;
}

bool netaddr_list_match(const netaddr_list_t *l, const netaddr_t *a)
{
    for (size_t i = 0; i < l->n; i++)
        if (prefix_equal(&l->v[i].net, a, l->v[i].bits)) return true;
    return false;
}

bool netaddr_pick_client(const netaddr_list_t *trusted, const char *xff, size_t len, char *out,
                         size_t outsz)
{
    /* From the right: each hop appended the address it received the request from, so the
     * entries up to the first untrusted one were written by our proxies; that one is the client
     * as our outermost proxy saw it. */
    netaddr_t addr;
    size_t end = len;
    for (;;) {
        size_t start = end;
        while (start > 0 && xff[start - 1] != ',')
            start--;
        size_t a = start, b = end;
        while (a < b && is_blank(xff[a]))
            a++;
        while (b > a && is_blank(xff[b - 1]))
            b--;
        if (!netaddr_parse(xff + a, b - a, &addr)) return false;
        if (!netaddr_list_match(trusted, &addr) || start == 0) break;
        end = start - 1;
    }
    netaddr_format(&addr, out, outsz);
    return out[0] != '\0';
}

static netaddr_list_t trusted_list;

int netaddr_trusted_load(const char *list)
{
    netaddr_list_free(&trusted_list);
    char err[256];
    if (netaddr_list_parse(&trusted_list, list, err, sizeof(err)) != 0) {
        log_error("config: TRUSTED_PROXIES: %s", err);
        return -1;
    }
    /* Wider than any private range (10/8, fc00::/7): such an entry takes in clients, and a
     * client it takes in can name any address it likes, the limits' keys included. Allowed
     * (a proxy may sit anywhere), but said at start. */
    for (size_t i = 0; i < trusted_list.n; i++) {
        const netaddr_cidr_t *c = &trusted_list.v[i];
        bool v4 = c->bits >= 96 && is_v4(&c->net);
        if (v4 ? c->bits < 96 + 8 : c->bits < 7) {
            char text[NETADDR_TEXT_MAX];
            netaddr_format(&c->net, text, sizeof(text));
            log_warn("config: TRUSTED_PROXIES entry %s/%u is wider than any private network: "
                     "every client inside it can choose the address coachd limits and logs",
                     text, v4 ? c->bits - 96 : c->bits);
        }
    }
    return 0;
}

const netaddr_list_t *netaddr_trusted(void)
{
    return &trusted_list;
}

bool netaddr_trusted_peer(const char *ip)
{
    if (trusted_list.n == 0 || !ip) return false;
    netaddr_t a;
    return netaddr_parse(ip, strlen(ip), &a) && netaddr_list_match(&trusted_list, &a);
}

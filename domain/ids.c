/* UUID v4 and CUID v1 formatting and shape checks (see ids.h). */
#include "domain/ids.h"

#include <string.h>

static void base36_fixed(uint64_t v, int width, char *out);
static bool is_hex(char c);

void ids_uuid_v4(const uint8_t rnd[16], char out[IDS_UUID_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    uint8_t b[16];
    size_t o = 0;

    memcpy(b, rnd, 16);
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[o++] = '-';
        out[o++] = digits[b[i] >> 4];
        out[o++] = digits[b[i] & 15];
    }
    out[o] = '\0';
}

static bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool ids_is_uuid(const char *s)
{
    if (s == NULL) return false;
    for (int i = 0; i < IDS_UUID_LEN; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-') return false;
        } else if (!is_hex(s[i])) {
            return false; /* also stops at a NUL before position 36 */
        }
    }
    return s[IDS_UUID_LEN] == '\0';
}

/* Writes exactly `width` base36 digits of v (its low-order ones), zero-padded. */
static void base36_fixed(uint64_t v, int width, char *out)
{
    static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";

    for (int i = width - 1; i >= 0; i--) {
        out[i] = digits[v % 36];
        v /= 36;
    }
}

void ids_cuid(uint64_t now_ms, uint32_t counter, uint32_t fingerprint,
              const uint8_t rnd[IDS_CUID_RANDOM_BYTES], char out[IDS_CUID_LEN + 1])
{
    uint32_t r1 = (uint32_t)rnd[0] << 24 | (uint32_t)rnd[1] << 16 | (uint32_t)rnd[2] << 8 | rnd[3];
    uint32_t r2 = (uint32_t)rnd[4] << 24 | (uint32_t)rnd[5] << 16 | (uint32_t)rnd[6] << 8 | rnd[7];

    out[0] = 'c';
    /* 8 base36 digits of milliseconds last until the year 2059, as in the original cuid. */
    base36_fixed(now_ms, 8, out + 1);
    base36_fixed(counter, 4, out + 9);
    base36_fixed(fingerprint, 4, out + 13);
    base36_fixed(r1, 4, out + 17);
    base36_fixed(r2, 4, out + 21);
    out[IDS_CUID_LEN] = '\0';
}

bool ids_is_cuid(const char *s)
{
    if (s == NULL || s[0] != 'c') return false;
    for (int i = 1; i < IDS_CUID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z'))) return false;
    return s[IDS_CUID_LEN] == '\0';
}

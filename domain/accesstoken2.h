/*
 * Agora AccessToken2 ("007") tokens for video (RTC) and chat (RTM), built as the reference
 * implementations do (REFERENCE.md section 4): little-endian binary, HMAC-SHA256 signature
 * over the signing info with a key derived from issueTs and salt, zlib compress(), standard
 * base64, "007" prefix.
 *
 * The generic accesstoken2_build() takes any list of services; accesstoken2_rtc_publisher()
 * and accesstoken2_rtm() are the two the API issues. Times are passed in: issue_ts is Unix
 * seconds, expire and privilege values are seconds relative to issue_ts. salt is random in
 * [1, 99999999] from the caller. Output strings are malloc'd and owned by the caller (free()).
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

enum {
    ACCESSTOKEN2_SERVICE_RTC = 1,
    ACCESSTOKEN2_SERVICE_RTM = 2,
};

enum {
    ACCESSTOKEN2_PRIV_JOIN_CHANNEL = 1,
    ACCESSTOKEN2_PRIV_PUBLISH_AUDIO = 2,
    ACCESSTOKEN2_PRIV_PUBLISH_VIDEO = 3,
    ACCESSTOKEN2_PRIV_PUBLISH_DATA = 4,
    ACCESSTOKEN2_PRIV_RTM_LOGIN = 1,
};

#define ACCESSTOKEN2_MAX_PRIVS 8
#define ACCESSTOKEN2_MAX_PAYLOAD 2

typedef struct accesstoken2_privilege {
    uint16_t key;
    uint32_t value; /* seconds relative to issue_ts */
} accesstoken2_privilege_t;

/* One service: its type, privileges (any order; written in ascending key order) and payload
 * strings (RTC: channel name, then uid as decimal text or "" for uid 0; RTM: user id). */
typedef struct accesstoken2_service {
    uint16_t type;
    accesstoken2_privilege_t privs[ACCESSTOKEN2_MAX_PRIVS];
    size_t nprivs;
    const char *payload[ACCESSTOKEN2_MAX_PAYLOAD];
    size_t npayload;
} accesstoken2_service_t;

/* Builds a token over services[0..n) (written sorted by type). 0 and *out set (caller frees),
 * DOMAIN_EINVAL (NULL or over-long strings, too many privileges or payload strings, duplicate
 * service types) or DOMAIN_EINTERNAL (zlib failure). */
int accesstoken2_build(const char *app_id, const char *app_cert, uint32_t issue_ts, uint32_t salt,
                       uint32_t expire, const accesstoken2_service_t *services, size_t n,
                       char **out);
/* RTC token for channel and uid (0 = any uid) with join + publish audio/video/data, each
 * privilege valid for `expire` seconds like the token itself. */
int accesstoken2_rtc_publisher(const char *app_id, const char *app_cert, const char *channel,
                               uint32_t uid, uint32_t issue_ts, uint32_t salt, uint32_t expire,
                               char **out);
/* RTM token (login privilege) for user_id. */
int accesstoken2_rtm(const char *app_id, const char *app_cert, const char *user_id,
                     uint32_t issue_ts, uint32_t salt, uint32_t expire, char **out);
/* Stable video uid for a user id: the first 4 bytes of SHA-256(user_id), big-endian, masked
 * to 31 bits; 0 (the "any uid" value) becomes 1. */
uint32_t accesstoken2_uid_from_user(const char *user_id);

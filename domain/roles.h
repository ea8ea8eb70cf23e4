/*
 * Roles, in rank order. Organization roles (Teacher..OrganizationAdmin) belong to a membership;
 * global roles (PlatformAdmin, Owner) to a user. Owner ranks above PlatformAdmin, so it passes
 * every check PlatformAdmin passes.
 */
#pragma once
#include <stdbool.h>

typedef enum role {
    ROLE_NONE = 0,
    ROLE_TEACHER,
    ROLE_COACH,
    ROLE_MANAGER,
    ROLE_ORG_ADMIN,
    ROLE_PLATFORM_ADMIN,
    ROLE_OWNER,
} role_t;

/* "Teacher", "Coach", "Manager", "OrganizationAdmin", "PlatformAdmin", "Owner" (exact case);
 * anything else, NULL included, gives ROLE_NONE. */
role_t role_parse(const char *s);
/* The API name of a role; NULL for ROLE_NONE or an out-of-range value. */
const char *role_name(role_t r);
/* The chat area's name: as role_name(), except ROLE_ORG_ADMIN is "OrgAdmin". */
const char *role_chat_name(role_t r);
/* PlatformAdmin or Owner. */
bool role_is_global(role_t r);
/* One of the four organization roles. */
bool role_is_org_role(role_t r);
/* True when `have` ranks at or above `need` (ROLE_NONE never satisfies a real role). */
bool role_at_least(role_t have, role_t need);

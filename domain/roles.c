/* Role names and rank checks (see roles.h). */
#include "domain/roles.h"

#include <stddef.h>
#include <string.h>

static const char *const names[] = {
    [ROLE_NONE] = NULL,
    [ROLE_TEACHER] = "Teacher",
    [ROLE_COACH] = "Coach",
    [ROLE_MANAGER] = "Manager",
    [ROLE_ORG_ADMIN] = "OrganizationAdmin",
    [ROLE_PLATFORM_ADMIN] = "PlatformAdmin",
    [ROLE_OWNER] = "Owner",
};

#define N_ROLES (sizeof names / sizeof names[0])

role_t role_parse(const char *s)
{
    if (s == NULL) return ROLE_NONE;
    for (size_t i = 1; i < N_ROLES; i++)
        if (strcmp(s, names[i]) == 0) return (role_t)i;
    return ROLE_NONE;
}

const char *role_name(role_t r)
{
    if ((unsigned)r >= N_ROLES) return NULL;
    return names[r];
}

const char *role_chat_name(role_t r)
{
    return r == ROLE_ORG_ADMIN ? "OrgAdmin" : role_name(r);
}

bool role_is_global(role_t r)
{
    return r == ROLE_PLATFORM_ADMIN || r == ROLE_OWNER;
}

bool role_is_org_role(role_t r)
{
    return r >= ROLE_TEACHER && r <= ROLE_ORG_ADMIN;
}

bool role_at_least(role_t have, role_t need)
{
    if ((unsigned)have >= N_ROLES || (unsigned)need >= N_ROLES) return false;
    return have >= need;
}

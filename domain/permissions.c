/* Authorization rules (see permissions.h). */
#include "domain/permissions.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

static perm_t deny(int status, const char *code, const char *message)
{
    return (perm_t){status, code, message, ROLE_NONE, NULL};
}

static perm_t forbid(const char *message)
{
    return deny(403, "FORBIDDEN", message);
}

/* 403 for want of a role: only `also` (may be NULL) or `need` and above may `what`. */
static perm_t forbid_role(role_t need, const char *also, const char *what)
{
    return (perm_t){403, "FORBIDDEN", what, need, also};
}

const char *perm_role_phrase(role_t need, char *buf, size_t n)
{
    const char *name = role_name(need);
    if (!name) name = "Teacher";
    if (need == ROLE_OWNER)
        snprintf(buf, n, "an Owner");
    else if (need == ROLE_PLATFORM_ADMIN)
        snprintf(buf, n, "a PlatformAdmin or an Owner");
    else
        snprintf(buf, n, "%s %s or above", need == ROLE_ORG_ADMIN ? "an" : "a", name);
    return buf;
}

const char *perm_message(perm_t p, char *buf, size_t n)
{
    if (p.need == ROLE_NONE || !p.message) return p.message;
    char who[64];
    perm_role_phrase(p.need, who, sizeof who);
    snprintf(buf, n, "Only %s%s%s may %s", p.also ? p.also : "", p.also ? " or " : "", who,
             p.message);
    return buf;
}

const char *perm_session_needs_active(const char *status)
{
    /* Who changes a mentorship's status: perm_mentorship_patch() (Manager and above). */
    if (status && strcmp(status, "pending") == 0)
        return "The mentorship is not active (it is pending); a Manager or above activates it "
               "with PATCH /api/mentorships/:id {\"status\":\"active\"}";
    if (status && strcmp(status, "paused") == 0)
        return "The mentorship is not active (it is paused); a Manager or above resumes it "
               "with PATCH /api/mentorships/:id {\"status\":\"active\"}";
    if (status && strcmp(status, "ended") == 0)
        return "The mentorship is not active (it has ended, which is final): it takes no new "
               "sessions";
    return "The mentorship is not active";
}

static perm_t not_found(const char *message)
{
    return deny(404, "NOT_FOUND", message);
}

/* Both set and equal. */
static bool same(const char *x, const char *y)
{
    return x && y && strcmp(x, y) == 0;
}

/* Both set and equal ignoring ASCII case (UUIDs from a request body). */
static bool same_nocase(const char *x, const char *y)
{
    if (!x || !y) return false;
    for (; *x && *y; x++, y++) {
        char cx = (*x >= 'A' && *x <= 'Z') ? (char)(*x + 32) : *x;
        char cy = (*y >= 'A' && *y <= 'Z') ? (char)(*y + 32) : *y;
        if (cx != cy) return false;
    }
    return *x == *y;
}

static bool is_global(const perm_actor_t *a)
{
    return a->global_role != ROLE_NONE;
}

role_t perm_role(const perm_actor_t *a)
{
    return is_global(a) ? a->global_role : a->org_role;
}

/* ---- the router guard ---- */

perm_t perm_guard_identity(const perm_actor_t *a, const perm_guard_facts_t *f)
{
    if (f->auth == PERM_AUTH_PUBLIC || f->auth == PERM_AUTH_OPTIONAL) return PERM_ALLOW;
    if (!a || !f->session) return deny(401, "UNAUTHENTICATED", "Authentication required");
    if (!f->user_active) return deny(401, "UNAUTHENTICATED", "Account is not active");
    if (f->org_header) {
        /* A global caller learns whether the organization exists; nobody else does. */
        if (!f->org_found)
            return is_global(a) ? not_found("Organization not found")
                                : forbid("Not a member of this organization");
        if (!is_global(a) && !f->member) return forbid("Not a member of this organization");
    }
    return PERM_ALLOW;
}

perm_t perm_guard_route(const perm_actor_t *a, const perm_guard_facts_t *f)
{
    if (f->auth == PERM_AUTH_PUBLIC || f->auth == PERM_AUTH_OPTIONAL) return PERM_ALLOW;
    if (f->pending_invites > 0 && !f->gate_exempt)
        return deny(403, "INVITE_GATE", "Accept or decline your pending invitations first");
    if (f->auth == PERM_AUTH_ORG && !a->org_id)
        return deny(400, "ORG_CONTEXT_REQUIRED",
                    "An active organization is required (X-Organization-Id)");
    if (f->min_role != ROLE_NONE && !role_at_least(perm_role(a), f->min_role))
        return forbid_role(f->min_role, NULL, "use this endpoint");
    return PERM_ALLOW;
}

perm_t perm_guard(const perm_actor_t *a, const perm_guard_facts_t *f)
{
    perm_t p = perm_guard_identity(a, f);
    return perm_allowed(p) ? perm_guard_route(a, f) : p;
}

/* ---- organizations ---- */

perm_t perm_org_access(const perm_actor_t *a, bool org_exists, role_t member_role, role_t need,
                       role_t *as)
{
    *as = ROLE_NONE;
    if (is_global(a)) {
        if (!org_exists) return not_found("Organization not found");
        *as = a->global_role;
        return PERM_ALLOW;
    }
    if (!role_is_org_role(member_role) || !role_at_least(member_role, need))
        return forbid_role(need, NULL, "do this in this organization");
    *as = member_role;
    return PERM_ALLOW;
}

perm_t perm_org_list(const perm_actor_t *a, bool org_admin_somewhere)
{
    if (is_global(a) || org_admin_somewhere) return PERM_ALLOW;
    return forbid_role(ROLE_ORG_ADMIN, NULL,
                       "list organizations (an OrganizationAdmin: their own)");
}

perm_members_t perm_member_view(role_t as)
{
    if (role_is_global(as) || as == ROLE_ORG_ADMIN) return PERM_MEMBERS_ALL;
    if (as == ROLE_MANAGER) return PERM_MEMBERS_MANAGER;
    if (as == ROLE_COACH) return PERM_MEMBERS_COACH;
    return PERM_MEMBERS_NONE;
}

perm_t perm_org_logo(const perm_actor_t *a, bool org_admin_there)
{
    if (role_is_global(perm_role(a)) || org_admin_there) return PERM_ALLOW;
    return forbid_role(ROLE_ORG_ADMIN, NULL, "change this organization's logo");
}

/* ---- invites ---- */

perm_t perm_invite_access(const perm_actor_t *a, bool org_exists, role_t member_role, role_t *as)
{
    *as = ROLE_NONE;
    if (is_global(a)) {
        if (!org_exists) return not_found("Organization not found");
        *as = a->global_role;
        return PERM_ALLOW;
    }
    if (!role_is_org_role(member_role)) return forbid("Not a member of this organization");
    if (!role_at_least(member_role, ROLE_MANAGER))
        return forbid_role(ROLE_MANAGER, NULL, "manage this organization's invites");
    *as = member_role;
    return PERM_ALLOW;
}

bool perm_may_grant(role_t as, role_t granted)
{
    if (role_at_least(as, ROLE_ORG_ADMIN)) return true;
    return as == ROLE_MANAGER && (granted == ROLE_COACH || granted == ROLE_TEACHER);
}

perm_t perm_invite_grant(role_t as, role_t granted, bool has_live, role_t live)
{
    /* Resending replaces the pending invite: its role must be grantable too. */
    if (!perm_may_grant(as, granted) || (has_live && !perm_may_grant(as, live)))
        return forbid_role(ROLE_ORG_ADMIN, NULL,
                           "invite a Manager or an OrganizationAdmin (a Manager invites Coach "
                           "and Teacher)");
    return PERM_ALLOW;
}

perm_t perm_switch_org(const perm_actor_t *a, bool org_exists, bool member)
{
    if (is_global(a) && !org_exists) return not_found("Organization not found");
    if (!member) return forbid("Not an active member of this organization");
    return PERM_ALLOW;
}

/* ---- users ---- */

perm_t perm_user_staff(const perm_actor_t *a, role_t min)
{
    if (is_global(a)) return PERM_ALLOW;
    if (!a->org_id)
        return deny(400, "ORG_CONTEXT_REQUIRED",
                    "An active organization is required (X-Organization-Id)");
    if (!role_at_least(a->org_role, min)) return forbid_role(min, NULL, "use this endpoint");
    return PERM_ALLOW;
}

perm_t perm_user_access(const perm_actor_t *a, const perm_user_target_t *t, perm_user_action_t act)
{
    /* Ending a user's sessions and resetting their two-factor sign-in are in the scope of
     * changing their status. */
    bool status =
        act == PERM_USER_STATUS || act == PERM_USER_SESSIONS || act == PERM_USER_TWO_FACTOR;
    if (t->self) {
        if (act == PERM_USER_STATUS) return forbid("You cannot change your own status");
        if (act == PERM_USER_SESSIONS)
            return forbid("End your own sessions with POST /api/auth/revoke-sessions");
        if (act == PERM_USER_TWO_FACTOR)
            return forbid("Turn your own two-factor sign-in off with POST "
                          "/api/auth/two-factor/disable");
        return PERM_ALLOW;
    }
    if (is_global(a)) {
        if ((act == PERM_USER_WRITE || status) && t->global_role > a->global_role)
            return forbid("You cannot change a user of a higher role");
        return PERM_ALLOW;
    }
    /* By id there is no 400: without an organization context nobody is in scope. */
    role_t min = status ? ROLE_ORG_ADMIN : ROLE_MANAGER;
    if (!a->org_id || !role_at_least(a->org_role, min)) {
        static const char *const what[] = {
            [PERM_USER_READ] = "read other users",
            [PERM_USER_WRITE] = "edit other users",
            [PERM_USER_STATUS] = "change a user's status",
            [PERM_USER_PRESENCE] = "see other users' presence",
            [PERM_USER_SESSIONS] = "end another user's sessions",
            [PERM_USER_TWO_FACTOR] = "reset another user's two-factor sign-in",
        };
        return forbid_role(min, NULL, what[act]);
    }
    if (!t->member) return forbid("This user is not in your organization");
    if (act == PERM_USER_PRESENCE) return PERM_ALLOW;
    /* A disabled member is out of the organization: nobody there edits their profile. */
    if (act == PERM_USER_WRITE && !t->active_member)
        return forbid("This user is not an active member of your organization");
    /* Status is global: an organization may not suspend or archive someone another
     * organization (or the platform) still relies on; it disables its own membership instead. */
    if (status && (t->global_role != ROLE_NONE || t->elsewhere))
        return forbid("This user belongs to another organization too; disable the membership "
                      "in yours instead");
    /* A Manager never reaches an OrganizationAdmin or a global user; an OrganizationAdmin
     * may read a global user who is a member, but not change them. */
    bool above;
    if (a->org_role == ROLE_MANAGER)
        above = t->global_role != ROLE_NONE || t->org_role == ROLE_ORG_ADMIN;
    else
        above = act != PERM_USER_READ && t->global_role != ROLE_NONE;
    if (above) return forbid("You cannot access a user of a higher role");
    return PERM_ALLOW;
}

/* ---- mentorships and sessions ---- */

bool perm_mentoring_all(const perm_actor_t *a)
{
    return role_at_least(perm_role(a), ROLE_MANAGER);
}

bool perm_notes_visible(const perm_actor_t *a)
{
    return perm_role(a) != ROLE_TEACHER;
}

perm_scope_t perm_mentoring_scope(const perm_actor_t *a)
{
    if (perm_mentoring_all(a)) return PERM_SCOPE_ALL;
    return perm_role(a) == ROLE_COACH ? PERM_SCOPE_COACH : PERM_SCOPE_TEACHER;
}

perm_t perm_mentoring_read(const perm_actor_t *a, perm_thing_t what, const char *org,
                           const char *coach, const char *teacher)
{
    bool session = what == PERM_SESSION;
    if (!org) return not_found(session ? "Session not found" : "Mentorship not found");
    if (!same(org, a->org_id))
        return forbid(session ? "Session belongs to another organization"
                              : "Mentorship belongs to another organization");
    if (!perm_mentoring_all(a) && !same(coach, a->user_id) && !same(teacher, a->user_id))
        return forbid_role(ROLE_MANAGER, "its coach, its teacher",
                           session ? "read this session" : "read this mentorship");
    return PERM_ALLOW;
}

perm_t perm_mentorship_change(const perm_actor_t *a, const char *org, const char *coach)
{
    if (!org) return not_found("Mentorship not found");
    if (!same(org, a->org_id)) return forbid("The mentorship belongs to another organization");
    if (!perm_mentoring_all(a) && !same(coach, a->user_id))
        return forbid_role(ROLE_MANAGER, "its coach",
                           "change this mentorship, schedule its sessions or attach files to it");
    return PERM_ALLOW;
}

perm_t perm_mentorship_create(const perm_actor_t *a, const char *org, const char *coach)
{
    if (!role_is_global(perm_role(a)) && !same_nocase(org, a->org_id))
        return forbid("Mentorships can only be created in your active organization");
    if (!perm_mentoring_all(a) && !same(coach, a->user_id))
        return forbid_role(ROLE_MANAGER, NULL,
                           "create a mentorship for another coach (a Coach creates their own)");
    return PERM_ALLOW;
}

perm_t perm_mentorship_patch(const perm_actor_t *a, bool sets_status)
{
    if (sets_status && !perm_mentoring_all(a))
        return forbid_role(ROLE_MANAGER, NULL,
                           "change a mentorship's status (activate, pause, resume or end it)");
    return PERM_ALLOW;
}

perm_t perm_session_change(const perm_actor_t *a, const char *org, const char *coach,
                           const char *teacher)
{
    if (!org) return not_found("Session not found");
    if (!same(org, a->org_id)) return forbid("The session belongs to another organization");
    if (!perm_mentoring_all(a)) {
        /* A Teacher confirms sessions of their mentorships; a Coach manages their own. */
        const char *owner = perm_role(a) == ROLE_TEACHER ? teacher : coach;
        if (!same(owner, a->user_id))
            return forbid_role(ROLE_MANAGER, "its coach, its teacher (to confirm it)",
                               "change this session");
    }
    return PERM_ALLOW;
}

perm_t perm_session_fields(const perm_actor_t *a, bool other_fields, const char *status)
{
    bool confirm = status && strcmp(status, "confirmed") == 0;
    role_t r = perm_role(a);
    if (r == ROLE_TEACHER && (other_fields || (status && !confirm)))
        return forbid_role(ROLE_MANAGER, "its coach",
                           "change a session beyond confirming it (a Teacher only confirms)");
    if (r == ROLE_COACH && confirm) return forbid("Only the session's teacher may confirm it");
    return PERM_ALLOW;
}

/* ---- chat ---- */

perm_t perm_chat_access(const perm_actor_t *a, perm_chat_need_t need, const char *org,
                        const char *coach, const char *teacher, bool *participant)
{
    bool part = false;
    if (participant) *participant = false;
    if (!org) return not_found("Mentorship not found");
    if (!same(org, a->org_id)) return forbid("The mentorship belongs to another organization");
    part = same(coach, a->user_id) || same(teacher, a->user_id) ||
           role_at_least(a->org_role, ROLE_MANAGER);
    if (participant) *participant = part;
    if (!part && !(need == PERM_CHAT_READ && is_global(a)))
        return forbid(is_global(a)
                          ? "PlatformAdmin and Owner read chats but do not take part in them"
                          : "Only its coach, its teacher or a Manager or above of the "
                            "organization take part in this mentorship's chat");
    return PERM_ALLOW;
}

perm_t perm_chat_edit(bool own)
{
    return own ? PERM_ALLOW : forbid("Only the sender may edit a message");
}

perm_t perm_chat_delete(const perm_actor_t *a, bool own)
{
    if (own || role_at_least(a->org_role, ROLE_MANAGER) || is_global(a)) return PERM_ALLOW;
    return forbid_role(ROLE_MANAGER, "its sender", "delete this message");
}

void perm_chat_conversations(const perm_actor_t *a, bool *all, bool *counts)
{
    *all = perm_mentoring_all(a);
    *counts = !is_global(a) || role_at_least(a->org_role, ROLE_MANAGER);
}

/* ---- files ---- */

bool perm_file_readable(const perm_actor_t *a, const char *org, const char *uploader,
                        bool participant)
{
    if (role_is_global(perm_role(a))) return true;
    if (same(uploader, a->user_id)) return true;
    if (!same(org, a->org_id)) return false;
    return perm_mentoring_all(a) || participant;
}

perm_t perm_file_read(const perm_actor_t *a, bool exists, const char *org, const char *uploader,
                      bool participant)
{
    if (!exists) return not_found("File not found");
    if (!perm_file_readable(a, org, uploader, participant))
        return forbid("You may not read this file");
    return PERM_ALLOW;
}

perm_t perm_file_attach(const perm_actor_t *a, const char *ment_org, const char *coach,
                        const char *file_org, const char *uploader, bool participant)
{
    perm_t p = perm_mentorship_change(a, ment_org, coach);
    if (!perm_allowed(p)) return p;
    if (!same(file_org, ment_org))
        return forbid("The file belongs to another organization than the mentorship");
    if (!perm_file_readable(a, file_org, uploader, participant))
        return forbid("You may not use this file");
    return PERM_ALLOW;
}

perm_t perm_attachments_read(const perm_actor_t *a, const char *org, const char *coach,
                             const char *teacher)
{
    if (!org) return not_found("Mentorship not found");
    if (role_is_global(perm_role(a))) return PERM_ALLOW;
    if (!same(org, a->org_id)) return forbid("The mentorship belongs to another organization");
    if (!perm_mentoring_all(a) && !same(coach, a->user_id) && !same(teacher, a->user_id))
        return forbid_role(ROLE_MANAGER, "its coach, its teacher",
                           "list this mentorship's attachments");
    return PERM_ALLOW;
}

/* ---- streams ---- */

perm_t perm_stream_mentorship(const perm_actor_t *a, bool exists, bool participant)
{
    if (!exists) return not_found("Mentorship not found");
    if (participant || role_at_least(a->global_role, ROLE_PLATFORM_ADMIN)) return PERM_ALLOW;
    return forbid_role(ROLE_PLATFORM_ADMIN, "its coach, its teacher",
                       "follow this mentorship's events");
}

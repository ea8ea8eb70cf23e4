/*
 * Who may do what: every authorization rule of the API as a pure function of facts the route
 * handler gathered (the caller's roles, the resource's organization and participants, what the
 * request wants to change). A handler reads the facts, asks one of these functions and replies
 * with the verdict; nothing here reads the database or the request.
 *
 * A refusal carries the HTTP status, the error code and the message the API answers with, so
 * that the role matrix (tests/role_matrix.tsv) can be walked here, in a unit test, and over HTTP
 * with the same expectations. A refusal for want of a role names the lowest role that may (and
 * who else may, "its coach"): perm_message() turns it into the answer's message, "Only its coach
 * or a Manager or above may change this mentorship", so that a client developer reads who can
 * do what they could not.
 */
#pragma once
#include <stdbool.h>
#include <stddef.h>

#include "domain/roles.h"

/* The verdict: status 0 allows; otherwise the answer (403 FORBIDDEN, 404 NOT_FOUND, ...). */
typedef struct perm {
    int status;
    const char *code;
    /* The whole message; with `need`, what the caller may not do ("change this mentorship"). */
    const char *message;
    role_t need;      /* a refusal for want of a role: the lowest role that may; else ROLE_NONE */
    const char *also; /* with need: who else may ("its coach"), or NULL */
} perm_t;

#define PERM_ALLOW ((perm_t){0, NULL, NULL, ROLE_NONE, NULL})

/* The message a refusal answers with: p.message, or for a role refusal "Only [also or ]a
 * <need> or above may <message>" (PlatformAdmin: "a PlatformAdmin or an Owner", Owner: "an
 * Owner") written into buf (truncated to n). Returns buf or p.message. */
const char *perm_message(perm_t p, char *buf, size_t n);

/* "a Manager or above" (see perm_message()) into buf; buf. */
const char *perm_role_phrase(role_t need, char *buf, size_t n);

/* The 422 of POST /api/sessions on a mentorship that is not active (`status` its API name):
 * which status it has and who changes it. */
const char *perm_session_needs_active(const char *status);

static inline bool perm_allowed(perm_t p)
{
    return p.status == 0;
}

/* The caller as the rules see it. */
typedef struct perm_actor {
    const char *user_id;
    role_t global_role; /* ROLE_NONE, ROLE_PLATFORM_ADMIN or ROLE_OWNER */
    role_t org_role;    /* role of the active membership in org_id, or ROLE_NONE */
    const char *org_id; /* the active organization, or NULL */
} perm_actor_t;

/* The effective role: the global role when set, else the role in the active organization. */
role_t perm_role(const perm_actor_t *a);

/* ---- the router guard ---- */

typedef enum perm_auth {
    PERM_AUTH_PUBLIC,   /* no session needed */
    PERM_AUTH_OPTIONAL, /* a session is read when present; never refuses */
    PERM_AUTH_SESSION,  /* a session is needed */
    PERM_AUTH_ORG,      /* a session and an active organization are needed */
} perm_auth_t;

typedef struct perm_guard_facts {
    perm_auth_t auth;
    role_t min_role;     /* the route's minimum effective role, ROLE_NONE for none */
    bool gate_exempt;    /* the route stays open while invites are pending */
    bool session;        /* a valid, unexpired session cookie */
    bool user_active;    /* the session's user has status active */
    bool org_header;     /* X-Organization-Id was sent */
    bool org_found;      /* ... and names an existing organization */
    bool member;         /* the caller holds an active membership in the organization */
    int pending_invites; /* pending, unexpired invites for the caller's email */
} perm_guard_facts_t;

/* The guard's verdict before every handler: perm_guard_identity() then perm_guard_route(). `a`
 * carries the caller's global role and, when an organization resolved, org_id and org_role; NULL
 * when there is no session. Public and optional routes never refuse. */
perm_t perm_guard(const perm_actor_t *a, const perm_guard_facts_t *f);
/* The session, the account's status and X-Organization-Id. */
perm_t perm_guard_identity(const perm_actor_t *a, const perm_guard_facts_t *f);
/* The invite gate, the organization context and the route's minimum role. */
perm_t perm_guard_route(const perm_actor_t *a, const perm_guard_facts_t *f);

/* ---- organizations ---- */

/* Acting on organization X (GET/PATCH organization, its member list and memberships): a global
 * caller on any existing organization (404 otherwise); an organization-scoped caller whose active
 * membership in X (`member_role`, ROLE_NONE for none) ranks at least `need`. *as receives the
 * role the caller acts with. */
perm_t perm_org_access(const perm_actor_t *a, bool org_exists, role_t member_role, role_t need,
                       role_t *as);

/* GET /api/organizations: global roles (every organization) and OrganizationAdmins (their
 * own: `org_admin_somewhere`). */
perm_t perm_org_list(const perm_actor_t *a, bool org_admin_somewhere);

/* Which members of an organization a caller acting as `as` sees in its member list. */
typedef enum perm_members {
    PERM_MEMBERS_NONE,    /* may not list */
    PERM_MEMBERS_ALL,     /* global roles and OrganizationAdmin */
    PERM_MEMBERS_MANAGER, /* everyone but OrganizationAdmins and global users */
    PERM_MEMBERS_COACH,   /* active Teachers only */
} perm_members_t;
perm_members_t perm_member_view(role_t as);

/* Changing an organization's logo: global roles, or an OrganizationAdmin of it. */
perm_t perm_org_logo(const perm_actor_t *a, bool org_admin_there);

/* ---- invites ---- */

/* Managing the invites of organization X: as perm_org_access() with need Manager, with the
 * invite area's messages. */
perm_t perm_invite_access(const perm_actor_t *a, bool org_exists, role_t member_role, role_t *as);
/* Manager grants Coach and Teacher; OrganizationAdmin and the global roles any role. */
bool perm_may_grant(role_t as, role_t granted);
/* Creating (or resending) an invite for role `granted`; `live` is the role of the pending
 * invite the request would replace (has_live false when there is none). */
perm_t perm_invite_grant(role_t as, role_t granted, bool has_live, role_t live);

/* POST /api/me/switch-organization to X: global callers to any existing organization, others
 * only where they hold an active membership (`member` true). */
perm_t perm_switch_org(const perm_actor_t *a, bool org_exists, bool member);

/* ---- users ---- */

typedef enum perm_user_action {
    PERM_USER_READ,       /* GET /api/users/:id */
    PERM_USER_WRITE,      /* PATCH profile fields */
    PERM_USER_STATUS,     /* PATCH status, DELETE */
    PERM_USER_PRESENCE,   /* GET presence */
    PERM_USER_SESSIONS,   /* POST /api/users/:id/revoke-sessions: whoever may set the status */
    PERM_USER_TWO_FACTOR, /* DELETE /api/users/:id/two-factor: whoever may set the status */
} perm_user_action_t;

typedef struct perm_user_target {
    bool self;
    role_t global_role; /* ROLE_NONE, ROLE_PLATFORM_ADMIN or ROLE_OWNER */
    bool member;        /* holds a membership (any status) in the caller's active organization */
    bool active_member; /* ... and that membership is active */
    bool elsewhere;     /* holds an active membership in another organization */
    role_t org_role;    /* the role of that membership */
} perm_user_target_t;

/* Staff-only user endpoints (list, create): global roles, or at least `min` in the active
 * organization (400 ORG_CONTEXT_REQUIRED without one). */
perm_t perm_user_staff(const perm_actor_t *a, role_t min);
/* Acting on one user (routes/users.c explains the scope). */
perm_t perm_user_access(const perm_actor_t *a, const perm_user_target_t *t, perm_user_action_t act);

/* ---- mentorships and sessions ---- */

/* Manager, OrganizationAdmin, PlatformAdmin, Owner: every mentorship of the organization. */
bool perm_mentoring_all(const perm_actor_t *a);
/* Notes of mentorships and sessions are hidden from Teachers. */
bool perm_notes_visible(const perm_actor_t *a);

/* Whose mentorships and sessions a list shows. */
typedef enum perm_scope {
    PERM_SCOPE_ALL,
    PERM_SCOPE_COACH,   /* where the caller is the coach */
    PERM_SCOPE_TEACHER, /* where the caller is the teacher */
} perm_scope_t;
perm_scope_t perm_mentoring_scope(const perm_actor_t *a);

typedef enum perm_thing {
    PERM_MENTORSHIP,
    PERM_SESSION,
} perm_thing_t;

/* Reading a mentorship or a session: `org` NULL when it does not exist (404); another
 * organization 403; below Manager only as its coach or teacher. */
perm_t perm_mentoring_read(const perm_actor_t *a, perm_thing_t what, const char *org,
                           const char *coach, const char *teacher);
/* Changing a mentorship (PATCH, DELETE, attaching files, scheduling sessions): `org` NULL when it
 * does not exist; below Manager only its coach. */
perm_t perm_mentorship_change(const perm_actor_t *a, const char *org, const char *coach);
/* POST /api/mentorships into organization `org` for `coach`. */
perm_t perm_mentorship_create(const perm_actor_t *a, const char *org, const char *coach);
/* PATCH /api/mentorships/:id: only managers and above change the status. */
perm_t perm_mentorship_patch(const perm_actor_t *a, bool sets_status);
/* Changing a session (PATCH, DELETE): `org` NULL when it does not exist; below Manager the coach,
 * or the teacher (a Teacher only confirms). */
perm_t perm_session_change(const perm_actor_t *a, const char *org, const char *coach,
                           const char *teacher);
/* Which fields of a session PATCH the caller's role may send: a Teacher only status
 * `confirmed`; a Coach anything but `confirmed`. `status` NULL when not sent. */
perm_t perm_session_fields(const perm_actor_t *a, bool other_fields, const char *status);

/* ---- chat ---- */

typedef enum perm_chat_need {
    PERM_CHAT_READ,        /* participants, PlatformAdmin, Owner */
    PERM_CHAT_PARTICIPATE, /* participants only */
} perm_chat_need_t;

/* A mentorship's chat: the coach, the teacher and the organization's Managers and
 * OrganizationAdmins take part; the global roles read. `org` NULL when the mentorship does not
 * exist. *participant (may be NULL) says whether the caller takes part. */
perm_t perm_chat_access(const perm_actor_t *a, perm_chat_need_t need, const char *org,
                        const char *coach, const char *teacher, bool *participant);
/* Editing a message: its sender only. */
perm_t perm_chat_edit(bool own);
/* Deleting a message: its sender, the organization's Managers and OrganizationAdmins, the
 * global roles. */
perm_t perm_chat_delete(const perm_actor_t *a, bool own);
/* The conversation list: *all when every mentorship of the organization is listed, *counts when
 * unread counts are computed (a global caller who is not staff there reads, but has none). */
void perm_chat_conversations(const perm_actor_t *a, bool *all, bool *counts);

/* ---- files ---- */

/* Reading a file: global roles; its uploader; in its organization a Manager and above, or a
 * participant of a mentorship it is attached to. `org` NULL for a file of no organization. */
bool perm_file_readable(const perm_actor_t *a, const char *org, const char *uploader,
                        bool participant);
/* GET /api/files/:fileId; `exists` false answers 404. */
perm_t perm_file_read(const perm_actor_t *a, bool exists, const char *org, const char *uploader,
                      bool participant);
/* Attaching a file to a mentorship: perm_mentorship_change() on the mentorship (`ment_org` NULL
 * when it does not exist), the file in the same organization, and readable by the caller. */
perm_t perm_file_attach(const perm_actor_t *a, const char *ment_org, const char *coach,
                        const char *file_org, const char *uploader, bool participant);
/* The attachment list of a mentorship (`org` NULL when it does not exist): global roles any;
 * others in their organization, below Manager only their own mentorships. */
perm_t perm_attachments_read(const perm_actor_t *a, const char *org, const char *coach,
                             const char *teacher);

/* ---- streams ---- */

/* A mentorship's event stream: its coach or teacher (`participant`, with an active membership),
 * or a global role; `exists` false answers 404. */
perm_t perm_stream_mentorship(const perm_actor_t *a, bool exists, bool participant);

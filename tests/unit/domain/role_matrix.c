/*
 * The role matrix through the rules: every row of tests/role_matrix.tsv (endpoint x caller x
 * relation -> status) is turned into the facts a handler would gather in the world that
 * tests/api/test_role_matrix.py builds over HTTP, and decided by domain/permissions.h in the
 * order the handler asks. Allowed must mean a 2xx row; a refusal must carry the row's status.
 *
 * The world: organization A ("org-a") with OrganizationAdmin, Manager, the pair Coach / Teacher
 * (relation "own"), the pair Coach2 / Teacher2 ("other"), a disabled member and an archived
 * user; organization B ("org-b") with OtherOrgAdmin and the pair CoachB / TeacherB
 * ("otherorg"); PlatformAdmin and Owner acting in A. User ids are the actor names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "domain/permissions.h"

typedef struct row {
    char method[8], path[96], action[40], auth[16], min[24], actor[24], relation[16];
    int status;
    int line;
} row_t;

/* ---- the world ---- */

typedef struct actor {
    perm_actor_t a;
    bool session, active, member; /* member: an active membership where the header points */
} actor_t;

static actor_t actor_of(const char *name)
{
    actor_t x = {{name, ROLE_NONE, ROLE_NONE, "org-a"}, true, true, true};
    if (strcmp(name, "NoSession") == 0) {
        x.session = false;
        x.a.org_id = NULL;
    } else if (strcmp(name, "ArchivedUser") == 0) {
        x.active = false;
        x.a.org_role = ROLE_COACH;
    } else if (strcmp(name, "DisabledMember") == 0) {
        /* The membership is disabled: no organization resolves from the header. */
        x.member = false;
        x.a.org_id = NULL;
    } else if (strcmp(name, "PlatformAdmin") == 0 || strcmp(name, "Owner") == 0) {
        x.a.global_role = role_parse(name);
    } else if (strcmp(name, "OtherOrgAdmin") == 0) {
        x.a.org_role = ROLE_ORG_ADMIN;
        x.a.org_id = "org-b";
    } else {
        x.a.org_role = role_parse(name);
        assert_true(role_is_org_role(x.a.org_role));
    }
    return x;
}

typedef struct mentorship {
    const char *org, *coach, *teacher;
} mentorship_t;

static mentorship_t mentorship_of(const char *rel)
{
    if (strcmp(rel, "own") == 0) return (mentorship_t){"org-a", "Coach", "Teacher"};
    if (strcmp(rel, "other") == 0) return (mentorship_t){"org-a", "Coach2", "Teacher2"};
    assert_string_equal(rel, "otherorg");
    return (mentorship_t){"org-b", "CoachB", "TeacherB"};
}

static const char *org_of(const char *rel)
{
    if (strcmp(rel, "own") == 0) return "org-a";
    assert_string_equal(rel, "otherorg");
    return "org-b";
}

/* The caller's active role in organization `org` (what the statements read). */
static role_t member_role(const actor_t *x, const char *org)
{
    if (x->a.global_role != ROLE_NONE || !x->a.org_id) return ROLE_NONE;
    return strcmp(x->a.org_id, org) == 0 ? x->a.org_role : ROLE_NONE;
}

/* The user a users row targets, as seen from the caller's active organization. */
static perm_user_target_t user_of(const actor_t *x, const char *rel)
{
    perm_user_target_t t = {0};
    const char *org = NULL, *id = NULL;
    role_t role = ROLE_NONE;
    if (strcmp(rel, "own") == 0) {
        t.self = true;
        return t;
    }
    if (strcmp(rel, "other") == 0) {
        id = "Coach2", org = "org-a", role = ROLE_COACH;
    } else if (strcmp(rel, "otherorg") == 0) {
        id = "CoachB", org = "org-b", role = ROLE_COACH;
    } else {
        assert_string_equal(rel, "admin");
        id = "OrganizationAdmin", org = "org-a", role = ROLE_ORG_ADMIN;
    }
    t.self = strcmp(id, x->a.user_id) == 0;
    t.member = x->a.org_id && strcmp(x->a.org_id, org) == 0;
    t.active_member = t.member;
    t.org_role = t.member ? role : ROLE_NONE;
    return t;
}

static bool party(const actor_t *x, const mentorship_t *m)
{
    return strcmp(x->a.user_id, m->coach) == 0 || strcmp(x->a.user_id, m->teacher) == 0;
}

/* ---- one row ---- */

static perm_t decide(const row_t *row)
{
    actor_t x = actor_of(row->actor);
    const perm_actor_t *a = &x.a;
    perm_guard_facts_t g = {
        .auth = strcmp(row->auth, "org") == 0        ? PERM_AUTH_ORG
                : strcmp(row->auth, "optional") == 0 ? PERM_AUTH_OPTIONAL
                : strcmp(row->auth, "public") == 0   ? PERM_AUTH_PUBLIC
                                                     : PERM_AUTH_SESSION,
        .min_role = strcmp(row->min, "-") == 0 ? ROLE_NONE : role_parse(row->min),
        .session = x.session,
        .user_active = x.active,
        .org_header = true, /* every caller sends X-Organization-Id */
        .org_found = true,
        .member = x.member,
    };
    assert_true(strcmp(row->min, "-") == 0 || g.min_role != ROLE_NONE);
    assert_true(g.auth != PERM_AUTH_SESSION || strcmp(row->auth, "session") == 0);
    perm_t p = perm_guard(x.session ? a : NULL, &g);
    if (!perm_allowed(p)) return p;

    const char *act = row->action, *rel = row->relation;
    role_t as;
    if (strcmp(act, "org.list") == 0)
        return perm_org_list(a, a->org_role == ROLE_ORG_ADMIN); /* each admin is one org's */
    if (strcmp(act, "org.create") == 0 || strcmp(act, "org.archive") == 0 ||
        strcmp(act, "users.me.update") == 0 || strcmp(act, "auth.get-session") == 0 ||
        strcmp(act, "openapi") == 0 || strcmp(act, "push.register") == 0 ||
        strncmp(act, "calendar.", 9) == 0 || strncmp(act, "auth.two-factor.", 16) == 0)
        return PERM_ALLOW; /* the guard decides */
    if (strcmp(act, "org.read") == 0 || strcmp(act, "org.update") == 0)
        return perm_org_access(a, true, member_role(&x, org_of(rel)), ROLE_ORG_ADMIN, &as);
    if (strcmp(act, "org.members") == 0) {
        p = perm_org_access(a, true, member_role(&x, org_of(rel)), ROLE_COACH, &as);
        if (perm_allowed(p)) assert_int_not_equal(perm_member_view(as), PERM_MEMBERS_NONE);
        return p;
    }
    if (strcmp(act, "member.update") == 0 || strcmp(act, "member.add") == 0 ||
        strcmp(act, "member.disable") == 0)
        return perm_org_access(a, true, member_role(&x, org_of(rel)), ROLE_ORG_ADMIN, &as);
    if (strcmp(act, "org.invites.list") == 0)
        return perm_invite_access(a, true, member_role(&x, org_of(rel)), &as);
    if (strncmp(act, "org.invite.", 11) == 0) {
        p = perm_invite_access(a, true, member_role(&x, org_of(rel)), &as);
        if (!perm_allowed(p)) return p;
        role_t granted = strcmp(act + 11, "manager") == 0 ? ROLE_MANAGER : ROLE_TEACHER;
        assert_true(strcmp(act + 11, "manager") == 0 || strcmp(act + 11, "teacher") == 0);
        return perm_invite_grant(as, granted, false, ROLE_NONE);
    }
    if (strcmp(act, "me.switch") == 0) {
        const char *org = org_of(rel);
        return perm_switch_org(a, true, a->global_role != ROLE_NONE || member_role(&x, org));
    }
    if (strcmp(act, "users.list") == 0 || strcmp(act, "users.create") == 0)
        return perm_user_staff(a, ROLE_MANAGER);
    if (strcmp(act, "user.archive") == 0) { /* a fresh Coach of the relation's organization */
        perm_user_target_t t = user_of(&x, rel);
        return perm_user_access(a, &t, PERM_USER_STATUS);
    }
    if (strcmp(act, "user.revoke-sessions") == 0) { /* a fresh Coach, as user.archive */
        perm_user_target_t t = user_of(&x, rel);
        return perm_user_access(a, &t, PERM_USER_SESSIONS);
    }
    if (strcmp(act, "user.two-factor-reset") == 0) { /* a fresh Coach, as user.archive */
        perm_user_target_t t = user_of(&x, rel);
        return perm_user_access(a, &t, PERM_USER_TWO_FACTOR);
    }
    if (strncmp(act, "user.", 5) == 0) {
        perm_user_target_t t = user_of(&x, rel);
        perm_user_action_t ua = strcmp(act, "user.read") == 0       ? PERM_USER_READ
                                : strcmp(act, "user.update") == 0   ? PERM_USER_WRITE
                                : strcmp(act, "user.presence") == 0 ? PERM_USER_PRESENCE
                                                                    : (perm_user_action_t)-1;
        assert_true((int)ua >= 0);
        return perm_user_access(a, &t, ua);
    }
    if (strcmp(act, "mentorships.list") == 0 || strcmp(act, "sessions.list") == 0 ||
        strcmp(act, "chat.conversations") == 0 || strcmp(act, "auth.session") == 0 ||
        strcmp(act, "users.me") == 0 || strcmp(act, "me.organizations") == 0 ||
        strcmp(act, "me.current") == 0 || strcmp(act, "invites.mine") == 0 ||
        strcmp(act, "stream.user") == 0 || strcmp(act, "files.presign") == 0)
        return PERM_ALLOW; /* the guard decides; what is shown depends on the caller */

    mentorship_t m = mentorship_of(rel);
    if (strcmp(act, "mentorship.read") == 0)
        return perm_mentoring_read(a, PERM_MENTORSHIP, m.org, m.coach, m.teacher);
    if (strcmp(act, "session.read") == 0 || strcmp(act, "session.react") == 0 ||
        strcmp(act, "session.video") == 0)
        return perm_mentoring_read(a, PERM_SESSION, m.org, m.coach, m.teacher);
    if (strcmp(act, "mentorship.update") == 0) {
        p = perm_mentorship_patch(a, false);
        return perm_allowed(p) ? perm_mentorship_change(a, m.org, m.coach) : p;
    }
    if (strcmp(act, "session.update") == 0) {
        /* The fields are checked before the session is read. */
        p = perm_session_fields(a, true, NULL);
        return perm_allowed(p) ? perm_session_change(a, m.org, m.coach, m.teacher) : p;
    }
    if (strcmp(act, "chat.read") == 0 || strcmp(act, "chat.token") == 0)
        return perm_chat_access(a, PERM_CHAT_READ, m.org, m.coach, m.teacher, NULL);
    if (strcmp(act, "chat.post") == 0)
        return perm_chat_access(a, PERM_CHAT_PARTICIPATE, m.org, m.coach, m.teacher, NULL);
    if (strcmp(act, "attachments.read") == 0)
        return perm_attachments_read(a, m.org, m.coach, m.teacher);
    if (strcmp(act, "file.read") == 0) /* uploaded by the coach, attached to the mentorship */
        return perm_file_read(a, true, m.org, m.coach, party(&x, &m));
    if (strcmp(act, "mentorship.create") == 0) /* a fresh teacher with the pair's coach */
        return perm_mentorship_create(a, m.org, m.coach);
    if (strcmp(act, "mentorship.status") == 0) { /* the status is checked before the read */
        p = perm_mentorship_patch(a, true);
        return perm_allowed(p) ? perm_mentorship_change(a, m.org, m.coach) : p;
    }
    if (strcmp(act, "session.confirm") == 0) {
        p = perm_session_fields(a, false, "confirmed");
        return perm_allowed(p) ? perm_session_change(a, m.org, m.coach, m.teacher) : p;
    }
    if (strcmp(act, "chat.react") == 0 || strcmp(act, "chat.unreact") == 0)
        return perm_chat_access(a, PERM_CHAT_PARTICIPATE, m.org, m.coach, m.teacher, NULL);
    if (strcmp(act, "session.create") == 0 || strcmp(act, "file.detach") == 0 ||
        strcmp(act, "mentorship.end") == 0)
        return perm_mentorship_change(a, m.org, m.coach);
    if (strcmp(act, "session.cancel") == 0)
        return perm_session_change(a, m.org, m.coach, m.teacher);
    if (strcmp(act, "file.attach") == 0) {
        /* A fresh file of the mentorship's organization, uploaded by its coach, attached nowhere.
         */
        return perm_file_attach(a, m.org, m.coach, m.org, m.coach, false);
    }
    if (strcmp(act, "chat.unread") == 0 || strcmp(act, "chat.receipt") == 0)
        return perm_chat_access(a, PERM_CHAT_PARTICIPATE, m.org, m.coach, m.teacher, NULL);
    if (strcmp(act, "chat.edit") == 0) { /* a fresh message the coach sent */
        p = perm_chat_access(a, PERM_CHAT_PARTICIPATE, m.org, m.coach, m.teacher, NULL);
        return perm_allowed(p) ? perm_chat_edit(strcmp(a->user_id, m.coach) == 0) : p;
    }
    if (strcmp(act, "chat.delete") == 0) {
        p = perm_chat_access(a, PERM_CHAT_READ, m.org, m.coach, m.teacher, NULL);
        return perm_allowed(p) ? perm_chat_delete(a, strcmp(a->user_id, m.coach) == 0) : p;
    }
    if (strcmp(act, "stream.mentorship") == 0)
        return perm_stream_mentorship(a, true, party(&x, &m));
    fail_msg("line %d: unknown action %s", row->line, act);
    return PERM_ALLOW;
}

/* ---- the table ---- */

static bool parse_row(char *line, row_t *r)
{
    char *f[8];
    int n = 0;
    for (char *p = line; n < 8; n++) {
        f[n] = p;
        char *tab = strchr(p, '\t');
        if (!tab) {
            n++;
            break;
        }
        *tab = '\0';
        p = tab + 1;
    }
    if (n != 8) return false;
    snprintf(r->method, sizeof(r->method), "%s", f[0]);
    snprintf(r->path, sizeof(r->path), "%s", f[1]);
    snprintf(r->action, sizeof(r->action), "%s", f[2]);
    snprintf(r->auth, sizeof(r->auth), "%s", f[3]);
    snprintf(r->min, sizeof(r->min), "%s", f[4]);
    snprintf(r->actor, sizeof(r->actor), "%s", f[5]);
    snprintf(r->relation, sizeof(r->relation), "%s", f[6]);
    r->status = atoi(f[7]);
    return r->status >= 200 && r->status <= 599;
}

/* One row, one case: allowed must be a 2xx row, a refusal must carry the row's status. */
static void test_row(void **state)
{
    const row_t *r = *state;
    perm_t p = decide(r);
    bool ok_expected = r->status >= 200 && r->status < 300;
    char msg[256];
    const char *m = perm_message(p, msg, sizeof msg);
    if (perm_allowed(p) != ok_expected || (!perm_allowed(p) && p.status != r->status))
        fail_msg("line %d: %s %s as %s (%s): the table says %d, the rules say %d %s", r->line,
                 r->method, r->path, r->actor, r->relation, r->status,
                 perm_allowed(p) ? 200 : p.status, m ? m : "");
    /* A 403 FORBIDDEN says why: who may (a role refusal names its role) or the rule. */
    if (!perm_allowed(p) && p.status == 403 && strcmp(p.code, "FORBIDDEN") == 0) {
        if (!m || !*m) fail_msg("line %d: a 403 without a message", r->line);
        if (p.need != ROLE_NONE && !strstr(m, role_name(p.need)))
            fail_msg("line %d: \"%s\" does not name %s", r->line, m, role_name(p.need));
    }
}

/* Reads every row of the table (exits on a malformed one). */
static row_t *read_table(const char *path, size_t *n)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        perror(path);
        exit(2);
    }
    row_t *rows = NULL;
    size_t cap = 0;
    char line[512];
    int lineno = 0;
    *n = 0;
    while (fgets(line, sizeof(line), fp)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#' || strncmp(line, "method\t", 7) == 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            rows = realloc(rows, cap * sizeof(*rows));
            if (!rows) abort();
        }
        row_t *r = &rows[(*n)++];
        memset(r, 0, sizeof(*r));
        r->line = lineno;
        if (!parse_row(line, r)) {
            fprintf(stderr, "%s:%d: not 8 tab-separated columns ending in a status\n", path,
                    lineno);
            exit(2);
        }
    }
    fclose(fp);
    return rows;
}

/* ---- rules the table does not reach ---- */

static void test_grants(void **state)
{
    (void)state;
    static const role_t granters[] = {ROLE_TEACHER,   ROLE_COACH,          ROLE_MANAGER,
                                      ROLE_ORG_ADMIN, ROLE_PLATFORM_ADMIN, ROLE_OWNER};
    static const role_t granted[] = {ROLE_TEACHER, ROLE_COACH, ROLE_MANAGER, ROLE_ORG_ADMIN};
    for (size_t i = 0; i < 6; i++)
        for (size_t j = 0; j < 4; j++) {
            bool want = granters[i] >= ROLE_ORG_ADMIN ||
                        (granters[i] == ROLE_MANAGER && granted[j] <= ROLE_COACH);
            assert_int_equal(perm_may_grant(granters[i], granted[j]), want);
        }
    /* Resending a Manager invite is granting Manager again. */
    assert_int_equal(perm_invite_grant(ROLE_MANAGER, ROLE_TEACHER, true, ROLE_MANAGER).status, 403);
    assert_true(perm_allowed(perm_invite_grant(ROLE_MANAGER, ROLE_TEACHER, true, ROLE_COACH)));
}

static void test_guard_order(void **state)
{
    (void)state;
    perm_actor_t pa = {"u", ROLE_PLATFORM_ADMIN, ROLE_NONE, NULL};
    perm_actor_t coach = {"u", ROLE_NONE, ROLE_COACH, "org"};
    perm_guard_facts_t f = {.auth = PERM_AUTH_ORG, .session = true, .user_active = true};
    /* A global caller learns that the organization does not exist; a member does not. */
    f.org_header = true;
    assert_int_equal(perm_guard(&pa, &f).status, 404);
    assert_int_equal(perm_guard(&coach, &f).status, 403);
    /* The invite gate comes before the organization context and the role. */
    f.org_header = false;
    f.pending_invites = 1;
    f.min_role = ROLE_MANAGER;
    assert_string_equal(perm_guard(&coach, &f).code, "INVITE_GATE");
    f.gate_exempt = true;
    assert_string_equal(perm_guard(&pa, &f).code, "ORG_CONTEXT_REQUIRED");
    assert_int_equal(perm_guard(&coach, &f).status, 403);
    /* Public and optional routes never refuse. */
    f.auth = PERM_AUTH_OPTIONAL;
    f.session = false;
    assert_true(perm_allowed(perm_guard(NULL, &f)));
}

static void test_user_status_and_higher_roles(void **state)
{
    (void)state;
    perm_actor_t pa = {"pa", ROLE_PLATFORM_ADMIN, ROLE_NONE, NULL};
    perm_actor_t admin = {"ad", ROLE_NONE, ROLE_ORG_ADMIN, "org"};
    perm_actor_t manager = {"mg", ROLE_NONE, ROLE_MANAGER, "org"};
    perm_user_target_t owner = {.global_role = ROLE_OWNER};
    perm_user_target_t self = {.self = true};
    perm_user_target_t shared = {
        .member = true, .active_member = true, .elsewhere = true, .org_role = ROLE_TEACHER};
    perm_user_target_t disabled = {.member = true, .org_role = ROLE_TEACHER};
    assert_true(perm_allowed(perm_user_access(&pa, &owner, PERM_USER_READ)));
    assert_int_equal(perm_user_access(&pa, &owner, PERM_USER_WRITE).status, 403);
    assert_int_equal(perm_user_access(&pa, &self, PERM_USER_STATUS).status, 403);
    assert_int_equal(perm_user_access(&admin, &shared, PERM_USER_STATUS).status, 403);
    assert_true(perm_allowed(perm_user_access(&admin, &shared, PERM_USER_WRITE)));
    assert_int_equal(perm_user_access(&admin, &disabled, PERM_USER_WRITE).status, 403);
    assert_true(perm_allowed(perm_user_access(&admin, &disabled, PERM_USER_READ)));
    assert_int_equal(perm_user_access(&manager, &shared, PERM_USER_STATUS).status, 403);
    /* Nobody resets their own two-factor sign-in here (the password route does that), nor that
     * of a user another organization shares or of a higher role. */
    perm_t own = perm_user_access(&pa, &self, PERM_USER_TWO_FACTOR);
    assert_int_equal(own.status, 403);
    assert_non_null(strstr(own.message, "/api/auth/two-factor/disable"));
    assert_int_equal(perm_user_access(&admin, &shared, PERM_USER_TWO_FACTOR).status, 403);
    assert_int_equal(perm_user_access(&pa, &owner, PERM_USER_TWO_FACTOR).status, 403);
    assert_true(perm_allowed(perm_user_access(&admin, &disabled, PERM_USER_TWO_FACTOR)));
}

/* A role refusal's message names the role (and who else may); a rule's is its own. */
static void test_messages_name_the_role(void **state)
{
    (void)state;
    char buf[256], small[24];
    perm_actor_t coach = {"c", ROLE_NONE, ROLE_COACH, "org"};
    perm_t p = perm_mentorship_patch(&coach, true);
    assert_int_equal(p.status, 403);
    assert_string_equal(p.code, "FORBIDDEN");
    assert_int_equal(p.need, ROLE_MANAGER);
    assert_string_equal(perm_message(p, buf, sizeof buf),
                        "Only a Manager or above may change a mentorship's status (activate, "
                        "pause, resume or end it)");
    assert_string_equal(perm_message(perm_mentorship_change(&coach, "org", "x"), buf, sizeof buf),
                        "Only its coach or a Manager or above may change this mentorship, "
                        "schedule its sessions or attach files to it");
    assert_string_equal(
        perm_message(perm_session_fields(&coach, false, "confirmed"), buf, sizeof buf),
        "Only the session's teacher may confirm it");
    /* Truncated, still terminated. */
    assert_string_equal(perm_message(p, small, sizeof small), "Only a Manager or above");
    assert_string_equal(perm_role_phrase(ROLE_ORG_ADMIN, buf, sizeof buf),
                        "an OrganizationAdmin or above");
    assert_string_equal(perm_role_phrase(ROLE_PLATFORM_ADMIN, buf, sizeof buf),
                        "a PlatformAdmin or an Owner");
    assert_string_equal(perm_role_phrase(ROLE_OWNER, buf, sizeof buf), "an Owner");
    /* A refusal that is no role refusal answers its message as it is. */
    perm_t other = perm_mentorship_change(&coach, "elsewhere", "c");
    assert_ptr_equal(perm_message(other, buf, sizeof buf), other.message);
    assert_true(strstr(perm_session_needs_active("pending"), "(it is pending); a Manager or above "
                                                             "activates it") != NULL);
    assert_true(strstr(perm_session_needs_active("paused"), "resumes it") != NULL);
    assert_true(strstr(perm_session_needs_active("ended"), "final") != NULL);
}

static void test_session_fields_and_chat_edits(void **state)
{
    (void)state;
    perm_actor_t teacher = {"t", ROLE_NONE, ROLE_TEACHER, "org"};
    perm_actor_t coach = {"c", ROLE_NONE, ROLE_COACH, "org"};
    perm_actor_t owner = {"o", ROLE_OWNER, ROLE_NONE, "org"};
    assert_true(perm_allowed(perm_session_fields(&teacher, false, "confirmed")));
    assert_int_equal(perm_session_fields(&teacher, false, "cancelled").status, 403);
    assert_int_equal(perm_session_fields(&coach, false, "confirmed").status, 403);
    assert_true(perm_allowed(perm_session_fields(&coach, true, "cancelled")));
    /* A Teacher changes sessions of their mentorships, not of others'. */
    assert_true(perm_allowed(perm_session_change(&teacher, "org", "c", "t")));
    assert_int_equal(perm_session_change(&teacher, "org", "t", "x").status, 403);
    assert_int_equal(perm_session_change(&coach, NULL, "c", "t").status, 404);
    assert_true(perm_allowed(perm_chat_edit(true)));
    assert_int_equal(perm_chat_edit(false).status, 403);
    assert_true(perm_allowed(perm_chat_delete(&owner, false)));
    assert_int_equal(perm_chat_delete(&coach, false).status, 403);
    bool all, counts;
    perm_chat_conversations(&owner, &all, &counts);
    assert_true(all);
    assert_false(counts);
    perm_chat_conversations(&teacher, &all, &counts);
    assert_false(all);
    assert_true(counts);
    assert_int_equal(perm_mentoring_scope(&teacher), PERM_SCOPE_TEACHER);
    assert_int_equal(perm_mentoring_scope(&coach), PERM_SCOPE_COACH);
    assert_false(perm_notes_visible(&teacher));
    assert_true(perm_allowed(perm_mentorship_create(&owner, "ORG-2", "x")));
    perm_actor_t coach_upper = {"c", ROLE_NONE, ROLE_COACH, "abc"};
    assert_true(perm_allowed(perm_mentorship_create(&coach_upper, "ABC", "c")));
    assert_int_equal(perm_mentorship_create(&coach_upper, "ABC", "other").status, 403);
    assert_int_equal(perm_member_view(ROLE_TEACHER), PERM_MEMBERS_NONE);
    assert_int_equal(perm_org_logo(&coach, false).status, 403);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s tests/role_matrix.tsv\n", argv[0]);
        return 2;
    }
    size_t n = 0;
    row_t *rows = read_table(argv[1], &n);
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_grants),
        cmocka_unit_test(test_guard_order),
        cmocka_unit_test(test_user_status_and_higher_roles),
        cmocka_unit_test(test_session_fields_and_chat_edits),
        cmocka_unit_test(test_messages_name_the_role),
    };
    size_t nfixed = sizeof(fixed) / sizeof(fixed[0]);
    struct CMUnitTest *tests = calloc(n + nfixed, sizeof(*tests));
    if (!tests || n == 0) return 2;
    for (size_t i = 0; i < n; i++) {
        char *name = malloc(160);
        if (!name) abort();
        snprintf(name, 160, "%s %s/%s -> %d", rows[i].action, rows[i].actor, rows[i].relation,
                 rows[i].status);
        tests[i] = (struct CMUnitTest){name, test_row, NULL, NULL, &rows[i]};
    }
    memcpy(tests + n, fixed, sizeof(fixed));
    int failed = _cmocka_run_group_tests("domain/role_matrix", tests, n + nfixed, NULL, NULL);
    for (size_t i = 0; i < n; i++)
        free((char *)tests[i].name);
    free(tests);
    free(rows);
    return failed;
}

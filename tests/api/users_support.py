"""Local helpers of the users, presence and push-token tests.

LocalOrg builds an organization and its memberships with SQL, with the attributes of orgs.Org
(id, name, clients[role], users[role], add_member). It stands in for the make_org fixture until
POST /api/organizations and POST /api/organizations/:id/users are merged; then the tests can take
make_org instead (the memberships here also set the member's current organization, as the real
endpoint does for a first membership)."""
import uuid

from helpers import Client, psql, sign_up, unique_email

ORG_ROLES = ("OrganizationAdmin", "Manager", "Coach", "Teacher")


class LocalOrg:
    def __init__(self, name=None, roles=ORG_ROLES):
        self.id = str(uuid.uuid4())
        self.name = name or "Org %s" % uuid.uuid4().hex[:8]
        psql("INSERT INTO organizations (id, name) VALUES (:'id', :'n')", id=self.id, n=self.name)
        self.clients, self.users = {}, {}
        for role in roles:
            self.add_member(role)

    def add_member(self, role, key=None, first="Member", last=None, user=None, status="active"):
        """Signs up a new user (or takes (client, user) in `user`) and adds a membership."""
        if user is None:
            c, u = sign_up(email=unique_email(role.lower()), name="%s %s" % (first, last or role))
        else:
            c, u = user
        psql("INSERT INTO organization_memberships (organization_id, user_id, role_in_organization,"
             " membership_status) VALUES (:'o', :'u', :'r', :'s');"
             " UPDATE users SET current_organization_id = :'o'"
             " WHERE id = :'u' AND current_organization_id IS NULL",
             o=self.id, u=u["id"], r=role, s=status)
        if c is not None:
            c.org(self.id)
        self.clients[key or role] = c
        self.users[key or role] = u
        return c, u


def no_org_user(**kw):
    """A signed-in user without any membership and without X-Organization-Id."""
    c, u = sign_up(**kw)
    return c, u


def add_pending_invite(email, org_id):
    """A pending invite for `email` (turns the invite gate on for that user)."""
    psql("INSERT INTO invites (id, organization_id, email, role_in_organization, token_hash,"
         " expires_at) VALUES (:'id', :'o', :'e', 'Teacher', :'t', now() + interval '1 day')",
         id=str(uuid.uuid4()), o=org_id, e=email.lower(), t=uuid.uuid4().hex)

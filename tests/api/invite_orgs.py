"""Organizations for the invite tests, built with SQL.

Stand-in for orgs.Org / the make_org fixture until POST /api/organizations and
POST /api/organizations/:id/users exist on this branch: same attributes (id, name, admin,
clients[role], users[role]), so the tests can switch to the shared fixture unchanged."""
import uuid

from helpers import psql, sign_up, unique_email
from orgs import ORG_ROLES, make_platform_admin


def add_member(org_id, user_id, role, status="active", current=True):
    psql("INSERT INTO organization_memberships (organization_id, user_id, role_in_organization,"
         " membership_status) VALUES (:'o', :'u', :'r', :'s')"
         " ON CONFLICT (organization_id, user_id) DO UPDATE"
         " SET role_in_organization = EXCLUDED.role_in_organization,"
         " membership_status = EXCLUDED.membership_status",
         o=org_id, u=user_id, r=role, s=status)
    if current:
        psql("UPDATE users SET current_organization_id = :'o'"
             " WHERE id = :'u' AND current_organization_id IS NULL", o=org_id, u=user_id)


class SqlOrg:
    """An organization with one signed-in member per organization role."""

    def __init__(self, admin_client=None, name=None, roles=ORG_ROLES):
        self.admin = admin_client
        self.name = name or "Org %s" % uuid.uuid4().hex[:8]
        self.id = str(uuid.uuid4())
        psql("INSERT INTO organizations (id, name) VALUES (:'id', :'n')", id=self.id, n=self.name)
        self.clients, self.users = {}, {}
        for role in roles:
            self.add_member(role)

    def add_member(self, role, key=None, first="Member", last=None):
        c, u = sign_up(email=unique_email(role.lower()), name="%s %s" % (first, last or role))
        add_member(self.id, u["id"], role)
        c.org(self.id)
        self.clients[key or role] = c
        self.users[key or role] = u
        return c, u

    def client(self, role):
        return self.clients[role]


def make_sql_org(roles=ORG_ROLES, name=None):
    return SqlOrg(name=name, roles=roles)


def platform_admin(role="PlatformAdmin"):
    return make_platform_admin(role)

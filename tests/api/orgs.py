"""Organization fixtures shared by the API tests: a PlatformAdmin, and organizations with one
member per role. Built through the public API (the admin is promoted with SQL, as first-run can
only happen once per database)."""
import uuid

from helpers import psql, sign_up, unique_email

ORG_ROLES = ("OrganizationAdmin", "Manager", "Coach", "Teacher")


def make_platform_admin(role="PlatformAdmin"):
    """A signed-in user with a global role (PlatformAdmin or Owner): (client, user)."""
    c, u = sign_up(email=unique_email(role.lower()), name="%s Person" % role)
    psql("UPDATE users SET global_role = :'r' WHERE id = :'id'", r=role, id=u["id"])
    return c, u


class Org:
    """An organization with one signed-in member per organization role.

    org.id, org.name, org.admin (the PlatformAdmin client that made it),
    org.clients[role] -> client whose X-Organization-Id is this org, org.users[role] -> user dict.
    """

    def __init__(self, admin_client, name=None, roles=ORG_ROLES):
        self.admin = admin_client
        self.name = name or "Org %s" % uuid.uuid4().hex[:8]
        data = admin_client.post_json("/api/organizations", {"name": self.name}, expect=201)["data"]
        self.id = data["id"]
        self.clients, self.users = {}, {}
        for role in roles:
            self.add_member(role)

    def add_member(self, role, key=None, first="Member", last=None, lang=None, user=None):
        """Signs up a new user (named "first last", preferring `lang`), or takes the
        (client, user) pair `user` (client may be None), and adds it as `role` through the API.
        Stored under `key` (default: the role); returns (client, user)."""
        if user is None:
            c, u = sign_up(email=unique_email(role.lower()), name="%s %s" % (first, last or role),
                           lang=lang)
        else:
            c, u = user
        self.admin.post_json("/api/organizations/%s/users" % self.id,
                             {"userId": u["id"], "roleInOrganization": role}, expect=201)
        if c is not None:
            c.org(self.id)
        self.clients[key or role] = c
        self.users[key or role] = u
        return c, u

    def client(self, key):
        return self.clients[key]

    def uid(self, key):
        return self.users[key]["id"]


def new_org(roles=ORG_ROLES, name=None):
    """An Org made by a PlatformAdmin of its own (for helpers and tests without the make_org
    fixture)."""
    return Org(make_platform_admin()[0], name=name, roles=roles)

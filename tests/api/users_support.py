"""Helpers of the users and push-token tests."""
import uuid

from helpers import psql


def add_pending_invite(email, org_id):
    """A pending invite for `email` (turns the invite gate on for that user), written with SQL:
    it needs no admin of the organization and sends no mail."""
    psql("INSERT INTO invites (id, organization_id, email, role_in_organization, token_hash,"
         " expires_at) VALUES (:'id', :'o', :'e', 'Teacher', :'t', now() + interval '1 day')",
         id=str(uuid.uuid4()), o=org_id, e=email.lower(), t=uuid.uuid4().hex)

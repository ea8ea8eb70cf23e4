"""Memberships written with SQL for the invite tests, in states the API does not create:
disabled from the start, or added without becoming the current organization. Organizations
themselves come from orgs.py."""
from helpers import psql


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

-- The organization-scoped user list (GET /api/users for Managers and OrganizationAdmins) shows
-- each member's globalRole and hides users with a global role from Managers, and coachd caches
-- its pages at the organization_list_versions version of migration 0003. So a change of a
-- user's global role must move the versions of their organizations as well: the users trigger
-- of migration 0003 gets global_role in its WHEN clause (its function stays as it is).
DROP TRIGGER organization_list_versions_user ON users;
CREATE TRIGGER organization_list_versions_user AFTER UPDATE ON users
    FOR EACH ROW
    WHEN (OLD.email IS DISTINCT FROM NEW.email OR OLD.status IS DISTINCT FROM NEW.status
          OR OLD.first_name IS DISTINCT FROM NEW.first_name
          OR OLD.last_name IS DISTINCT FROM NEW.last_name
          OR OLD.avatar_url IS DISTINCT FROM NEW.avatar_url
          OR OLD.global_role IS DISTINCT FROM NEW.global_role)
    EXECUTE FUNCTION organization_list_versions_user();

-- Server-Sent Event streams (routes/events.c).

-- name: events_mentorship_access
-- columns: organization_id, participant
-- The mentorship $1 and whether the caller $2 is its coach or teacher with an active
-- membership in its organization. No row: no such mentorship.
SELECT m.organization_id,
       ($2 IN (m.coach_id, m.teacher_id)) AND EXISTS (
           SELECT 1 FROM organization_memberships om
           WHERE om.organization_id = m.organization_id AND om.user_id = $2
             AND om.membership_status = 'active') AS participant
FROM mentorships m
WHERE m.id = $1;

-- name: events_active_orgs
-- columns: organization_id
-- The organizations where the user $1's membership is active: the only ones whose events the
-- user stream carries.
SELECT organization_id
FROM organization_memberships
WHERE user_id = $1 AND membership_status = 'active';

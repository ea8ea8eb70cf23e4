"""A refusal says what to do: a 403 for want of a role names the lowest role that may (and who
else may: "its coach"), a rule names who ("only the invitee"), and POST /api/sessions on a
mentorship that is not active says its status and who changes it. Codes are unchanged."""
import pytest

from helpers import assert_error, sign_up, unique_email
from ment_fixtures import future, make_mentorship, make_session
from orgs import new_org


@pytest.fixture(scope="module")
def org():
    return new_org()


def session_body(m):
    return {"mentorshipId": m["id"], "scheduledAt": future(30)}


def test_coach_schedules_on_pending_mentorship():
    # A Coach's new mentorship is pending; scheduling on it says who activates it.
    org = new_org()
    m = make_mentorship(org, status="pending", by="Coach")
    assert m["status"] == "pending"
    err = assert_error(org.client("Coach").post("/api/sessions", json=session_body(m)), 422,
                       "UNPROCESSABLE")
    assert err["message"] == ("The mentorship is not active (it is pending); a Manager or above "
                              'activates it with PATCH /api/mentorships/:id {"status":"active"}')


def test_session_on_paused_and_ended_mentorship_says_its_status():
    o = new_org()
    m = make_mentorship(o, status="paused")
    err = assert_error(o.client("Coach").post("/api/sessions", json=session_body(m)), 422,
                       "UNPROCESSABLE")
    assert "(it is paused); a Manager or above resumes it" in err["message"], err
    o2 = new_org()
    m = make_mentorship(o2, status="ended")
    err = assert_error(o2.client("Manager").post("/api/sessions", json=session_body(m)), 422,
                       "UNPROCESSABLE")
    assert "(it has ended, which is final)" in err["message"], err


def test_coach_may_not_activate_and_is_told_who_may():
    org = new_org()
    m = make_mentorship(org, status="pending", by="Coach")
    err = assert_error(org.client("Coach").patch("/api/mentorships/%s" % m["id"],
                                                 json={"status": "active"}), 403, "FORBIDDEN")
    assert err["message"] == ("Only a Manager or above may change a mentorship's status "
                              "(activate, pause, resume or end it)")
    # The Manager then does, and the coach schedules.
    org.client("Manager").patch_json("/api/mentorships/%s" % m["id"], {"status": "active"})
    make_session(org, m["id"], scheduledAt=future(40))


def test_route_minimum_role_is_named():
    org = new_org()
    # POST /api/mentorships needs Coach; DELETE needs Manager (the router's guard).
    err = assert_error(org.client("Teacher").post("/api/mentorships", json={
        "organizationId": org.id, "coachId": org.uid("Coach"), "teacherId": org.uid("Teacher")}),
        403, "FORBIDDEN")
    assert err["message"] == "Only a Coach or above may use this endpoint"
    m = make_mentorship(org)
    err = assert_error(org.client("Coach").delete("/api/mentorships/%s" % m["id"]), 403,
                       "FORBIDDEN")
    assert err["message"] == "Only a Manager or above may use this endpoint"


def test_another_coachs_mentorship_names_its_coach_or_manager():
    o = new_org()
    o.add_member("Coach", key="Coach2")
    m = make_mentorship(o)
    err = assert_error(o.client("Coach2").post("/api/sessions", json=session_body(m)), 403,
                       "FORBIDDEN")
    assert err["message"] == ("Only its coach or a Manager or above may change this mentorship, "
                              "schedule its sessions or attach files to it")
    err = assert_error(o.client("Coach2").post("/api/mentorships", json={
        "organizationId": o.id, "coachId": o.uid("Coach"), "teacherId": o.uid("Teacher")}),
        403, "FORBIDDEN")
    assert err["message"] == ("Only a Manager or above may create a mentorship for another coach "
                              "(a Coach creates their own)")


def test_session_changes_name_who_may():
    o = new_org()
    m = make_mentorship(o)
    s = make_session(o, m["id"], scheduledAt=future(50))["data"]
    path = "/api/sessions/%s" % s["id"]
    err = assert_error(o.client("Teacher").patch(path, json={"durationMinutes": 30}), 403,
                       "FORBIDDEN")
    assert err["message"] == ("Only its coach or a Manager or above may change a session beyond "
                              "confirming it (a Teacher only confirms)")
    err = assert_error(o.client("Coach").patch(path, json={"status": "confirmed"}), 403,
                       "FORBIDDEN")
    assert err["message"] == "Only the session's teacher may confirm it"
    o.add_member("Coach", key="Coach2")
    err = assert_error(o.client("Coach2").patch(path, json={"notes": "x"}), 403, "FORBIDDEN")
    assert err["message"] == ("Only its coach, its teacher (to confirm it) or a Manager or above "
                              "may change this session")


def test_organization_and_invite_refusals_name_the_role(org):
    members = "/api/organizations/%s/users" % org.id
    err = assert_error(org.client("Manager").patch(
        "%s/%s" % (members, org.uid("Teacher")), json={"roleInOrganization": "Coach"}), 403,
        "FORBIDDEN")
    assert err["message"] == "Only an OrganizationAdmin or above may do this in this organization"
    invites = "/api/organizations/%s/invites" % org.id
    err = assert_error(org.client("Coach").get(invites), 403, "FORBIDDEN")
    assert err["message"] == "Only a Manager or above may manage this organization's invites"
    err = assert_error(org.client("Manager").post(invites, json={
        "email": unique_email("oa"), "roleInOrganization": "OrganizationAdmin"}), 403, "FORBIDDEN")
    assert err["message"] == ("Only an OrganizationAdmin or above may invite a Manager or an "
                              "OrganizationAdmin (a Manager invites Coach and Teacher)")
    err = assert_error(org.client("Manager").get("/api/organizations"), 403, "FORBIDDEN")
    assert "OrganizationAdmin" in err["message"], err


def test_only_the_invitee_accepts(org):
    d = org.client("Manager").post_json("/api/organizations/%s/invites" % org.id, {
        "email": unique_email("invitee"), "roleInOrganization": "Teacher"}, expect=201)["data"]
    other, _ = sign_up(email=unique_email("other"))
    for verb in ("accept", "decline"):
        err = assert_error(other.post("/api/invites/%s/%s" % (d["id"], verb)), 403, "FORBIDDEN")
        assert err["message"] == ("Only the invitee (signed in with the invite's email) may accept "
                                  "or decline it")

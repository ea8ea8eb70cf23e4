"""Every JSON answer is compact: no white space outside strings (no ": " nor ", ", no line breaks),
whether the handler wrote it in C or PostgreSQL rendered it (json_build_object and json_agg
write " : ", ", " and line breaks; jsonb::text ": " and ", "). The walk below takes answers of
every area: written by handlers, rendered by SQL, from cached list pages, and errors."""
import requests

from chat_fixtures import Chat
from helpers import PASSWORD, Client, unique_email
from ment_fixtures import future, make_session

WS = " \t\r\n"


def outside_strings_ws(text):
    """Offsets of white space outside JSON strings."""
    found, in_str, esc = [], False, False
    for i, ch in enumerate(text):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in WS:
            found.append(i)
    return found


def test_checker_can_fail():
    assert outside_strings_ws('{"a":"b, c: d","e":[1,2]}') == []
    assert outside_strings_ws('{"a" : 1}') == [4, 6]
    assert outside_strings_ws('{"a":1, "b":2}') == [7]
    assert outside_strings_ws('[{"a":"\\" , "}, \n {"b":2}]') != []


class Walk:
    def __init__(self):
        self.seen = []
        self.bad = []

    def __call__(self, r, what=None):
        what = what or "%s %s" % (r.request.method, r.request.path_url)
        if not r.content:
            return None
        assert r.headers.get("Content-Type", "").startswith("application/json"), (what, r.text)
        self.seen.append(what)
        ws = outside_strings_ws(r.text)
        if ws:
            i = ws[0]
            self.bad.append("%s %d: ...%s..." % (what, r.status_code, r.text[max(0, i - 40):i + 40]))
        return r.json() if r.content else None


def test_every_area_answers_compact_json():
    w = Walk()
    chat = Chat()
    org = chat.org
    mgr, coach, teacher = chat.c("Manager"), chat.c("Coach"), chat.c("Teacher")
    oa = chat.c("OrganizationAdmin")
    pa = org.admin.org(org.id)

    # health, auth, account, first-run (already done: its 409/403 error)
    w(Client().get("/api/health/live"))
    email = unique_email("compact")
    anon = Client()
    w(anon.post("/api/auth/sign-up/email", json={"email": email, "password": PASSWORD,
                                                 "name": "Compact Person"}))
    w(anon.get("/api/auth/session"))
    w(anon.get("/api/auth/get-session"))
    w(Client().post("/api/auth/sign-in/email", json={"email": email, "password": PASSWORD}))
    w(anon.get("/api/users/me"))
    w(anon.patch("/api/users/me", json={"firstName": "Compact", "timezone": "Europe/Madrid"}))
    w(anon.post("/api/users/me/password", json={"currentPassword": PASSWORD,
                                                "newPassword": PASSWORD + "2"}))
    w(Client().post("/api/auth/forget-password", json={"email": email}))
    w(Client().post("/api/setup/first-run", json={"email": unique_email(), "password": PASSWORD,
                                                   "name": "Some One"}))
    # me
    w(coach.get("/api/me/organizations"))
    w(coach.get("/api/me/current-organization"))
    w(coach.post("/api/me/switch-organization", json={"organizationId": org.id}))
    # users: list (global and organization-scoped, cached), by id, create, presence
    w(pa.get("/api/users"))
    w(mgr.get("/api/users"))
    w(mgr.get("/api/users"))  # a cached page
    w(mgr.get("/api/users/%s" % chat.uid("Teacher")))
    w(oa.patch("/api/users/%s" % chat.uid("Teacher"), json={"lastName": "Teacher"}))
    w(mgr.post("/api/users", json={"email": unique_email(), "password": PASSWORD,
                                   "firstName": "New", "lastName": "User"}))
    w(mgr.get("/api/users/%s/presence" % chat.uid("Teacher")))
    # organizations and members
    w(pa.get("/api/organizations"))
    w(pa.get("/api/organizations/%s" % org.id))
    w(pa.patch("/api/organizations/%s" % org.id, json={"description": "A, b: c"}))
    w(oa.get("/api/organizations/%s/users" % org.id))
    w(oa.get("/api/organizations/%s/users" % org.id))  # a cached page
    w(oa.patch("/api/organizations/%s/users/%s" % (org.id, chat.uid("Teacher2")),
               json={"roleInOrganization": "Teacher"}))
    w(pa.post("/api/organizations", json={"name": "Compact %s" % unique_email()}))
    # invites
    inv_email = unique_email("inv")
    inv = w(oa.post("/api/organizations/%s/invites" % org.id,
                    json={"email": inv_email, "roleInOrganization": "Teacher"}))
    w(oa.get("/api/organizations/%s/invites" % org.id))
    w(Client().get("/api/invites/%s" % inv["data"]["inviteToken"]))
    w(coach.get("/api/invites/my-pending"))
    # mentorships and sessions
    w(mgr.get("/api/mentorships"))
    w(mgr.get("/api/mentorships"))  # a cached page
    w(mgr.get("/api/mentorships/%s" % chat.id))
    w(coach.patch("/api/mentorships/%s" % chat.id, json={"description": "notes, more: yes"}))
    r = make_session(org, chat.id, by="Coach", scheduledAt=future(hours=48))
    sid = r["data"]["id"]
    w(coach.get("/api/sessions"))
    w(coach.get("/api/sessions"))  # a cached page
    w(coach.get("/api/sessions/%s" % sid))
    w(coach.patch("/api/sessions/%s" % sid, json={"notes": "agenda, items: two"}))
    w(teacher.post("/api/sessions/%s/reactions" % sid, json={"emoji": "\U0001F44D"}))
    # chat
    msg = w(coach.post(chat.msgs(), json={"body": "hola, qué: tal"}))["data"]
    w(teacher.post(chat.msgs("/%s/reactions" % msg["id"]), json={"emoji": "\U0001F44D"}))
    w(coach.post(chat.msgs("/%s/reactions" % msg["id"]), json={"emoji": "\U0001F389"}))
    w(coach.get(chat.msgs()))
    w(coach.get(chat.msgs()))  # a cached page
    w(coach.get(chat.msgs(), params={"q": "hola"}))
    w(coach.patch(chat.msgs("/%s" % msg["id"]), json={"body": "edited, again: yes"}))
    w(teacher.patch(chat.path("/read-receipt"), json={"lastReadMessageId": msg["id"]}))
    w(teacher.get(chat.path("/unread")))
    w(coach.get("/api/chat/conversations"))
    # files
    p = w(coach.post("/api/files/presign", json={"filename": "a b, c.txt", "mimeType": "text/plain",
                                                 "sizeBytes": 3}))["data"]
    requests.put(p["presignedUrl"], data=b"abc", headers={"Content-Type": "text/plain"})
    f = w(coach.post("/api/files/register", json={"storageKey": p["storageKey"],
                                                  "filename": "a b, c.txt",
                                                  "mimeType": "text/plain", "sizeBytes": 3}))
    fid = f["data"]["fileId"]
    w(coach.post("/api/files/%s/attach" % fid, json={"objectType": "mentorship",
                                                     "objectId": chat.id}))
    w(coach.get("/api/files/%s" % fid))
    w(coach.get("/api/files/mentorship/%s/attachments" % chat.id))
    # push tokens
    w(coach.post("/api/users/me/push-tokens", json={"token": "ExponentPushToken[%s]" % fid,
                                                     "platform": "ios"}))
    # errors: a validation failure with details, a 404, a 401
    w(coach.patch("/api/users/me", json={"firstName": "", "birthDate": "x"}))
    w(coach.get("/api/sessions/%s" % "6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f"))
    w(Client().get("/api/users/me"))
    w(mgr.delete("/api/mentorships/%s" % chat.id))

    assert len(w.seen) > 50
    assert not w.bad, "answers with white space outside strings:\n" + "\n".join(w.bad)

"""Files on the local driver: presign -> PUT -> register -> attach -> download, the errors of
INTERFACE.md, access per role, presigned URL tampering and expiry, detach deleting the record and
the object, multipart upload (streamed, limits, cut off mid-stream), avatars and logos."""
import hashlib
import os
import socket
import time
import urllib.parse

import pytest
import requests

from helpers import BASE_URL, Client, assert_error, psql, psql_value, sign_up, wait_until
from ment_fixtures import make_mentorship, platform_admin
from orgs import new_org

STORAGE_DIR = os.environ.get("COACHD_STORAGE_DIR", "")


@pytest.fixture(scope="module")
def org():
    o = new_org()
    o.add_member("Coach", key="Coach2", first="Other")
    o.add_member("Teacher", key="Teacher2", first="Other")
    return o


@pytest.fixture(scope="module")
def ment(org):
    return make_mentorship(org)


def presign(client, filename="notes.txt", mime="text/plain", size=5, expect=200, **extra):
    body = {"filename": filename, "mimeType": mime, "sizeBytes": size}
    body.update(extra)
    return client.post_json("/api/files/presign", body, expect=expect)


def upload_presigned(client, data, filename="notes.txt", mime="text/plain", prefix=None):
    """presign + PUT + register; returns (fileId, storageKey)."""
    extra = {"prefix": prefix} if prefix else {}
    p = presign(client, filename, mime, len(data), **extra)["data"]
    r = requests.put(p["presignedUrl"], data=data, headers={"Content-Type": mime})
    assert r.status_code in (200, 204), r.text
    reg = client.post_json("/api/files/register", {"storageKey": p["storageKey"],
                                                   "filename": filename, "mimeType": mime,
                                                   "sizeBytes": len(data)}, expect=201)["data"]
    return reg["fileId"], p["storageKey"], reg


def download(url):
    return requests.get(url)


# ---- the presigned flow -------------------------------------------------------------------


def test_presign_put_register_attach_download(org, ment):
    coach = org.client("Coach")
    data = b"hello files \x00\xff" * 1000
    fid, key, reg = upload_presigned(coach, data, filename="Plan ñ.txt")
    assert reg["sha256Hash"] == hashlib.sha256(data).hexdigest()
    assert key.startswith("uploads/") and key.endswith("/Plan__.txt"), key
    a = coach.post_json("/api/files/%s/attach" % fid,
                        {"objectType": "mentorship", "objectId": ment["id"]}, expect=201)["data"]
    assert a["fileId"] == fid and a["objectType"] == "mentorship" and a["objectId"] == ment["id"]
    f = org.client("Teacher").get_json("/api/files/%s" % fid)["data"]
    assert f["filename"] == "Plan ñ.txt" and f["mimeType"] == "text/plain"
    assert f["sizeBytes"] == len(data) and f["sha256Hash"] == hashlib.sha256(data).hexdigest()
    r = download(f["presignedUrl"])
    assert r.status_code == 200
    assert r.content == data
    assert hashlib.sha256(r.content).hexdigest() == f["sha256Hash"]
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    cd = r.headers["Content-Disposition"]
    assert cd.startswith("attachment;") and "filename*=UTF-8''Plan%20%C3%B1.txt" in cd, cd
    lst = org.client("Teacher").get_json("/api/files/mentorship/%s/attachments" % ment["id"])
    row = [x for x in lst["data"] if x["fileId"] == fid][0]
    assert row["attachmentId"] == a["attachmentId"] and row["sizeBytes"] == len(data)
    assert download(row["presignedUrl"]).content == data


def test_html_download_is_attachment_and_nosniff(org):
    coach = org.client("Coach")
    html = b"<html><script>alert(1)</script></html>"
    fid, _, _ = upload_presigned(coach, html, filename="x.html", mime="text/html")
    f = coach.get_json("/api/files/%s" % fid)["data"]
    r = download(f["presignedUrl"])
    assert r.content == html
    assert r.headers["Content-Type"].startswith("text/html")
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert r.headers["Content-Disposition"].startswith("attachment; filename=\"x.html\"")


def test_presign_errors(org):
    c = org.client("Teacher")
    assert_error(c.call("POST", "/api/files/presign", {"filename": "a", "mimeType": "application/x-msdownload",
                                                       "sizeBytes": 1})[0], 400, "VALIDATION_ERROR")
    assert_error(c.call("POST", "/api/files/presign", {"filename": "a.mp4", "mimeType": "video/mp4",
                                                       "sizeBytes": 500 * 1024 * 1024 + 1})[0], 413,
                 "PAYLOAD_TOO_LARGE")
    presign(c, "a.mp4", "video/mp4", 500 * 1024 * 1024)
    assert_error(c.call("POST", "/api/files/presign", {"filename": "a.png", "mimeType": "image/png",
                                                       "sizeBytes": 100 * 1024 * 1024 + 1})[0], 413)
    for body in ({"mimeType": "text/plain", "sizeBytes": 1},
                 {"filename": "a", "sizeBytes": 1},
                 {"filename": "a", "mimeType": "text/plain"},
                 {"filename": "a", "mimeType": "text/plain", "sizeBytes": -1},
                 {"filename": "a", "mimeType": "text/plain", "sizeBytes": "1"},
                 {"filename": "", "mimeType": "text/plain", "sizeBytes": 1}):
        assert_error(c.call("POST", "/api/files/presign", body)[0], 400, "VALIDATION_ERROR")
    for prefix in ("../x", "/a", "a/", "A", "a//b", "x" * 65, "a..b", ""):
        r, _ = c.call("POST", "/api/files/presign", {"filename": "a", "mimeType": "text/plain",
                                                     "sizeBytes": 1, "prefix": prefix})
        assert_error(r, 400, "VALIDATION_ERROR")
    p = presign(c, prefix="coach/docs-1_x")["data"]
    assert p["storageKey"].startswith("coach/docs-1_x/")
    assert_error(Client().call("POST", "/api/files/presign", {"filename": "a", "mimeType": "text/plain",
                                                              "sizeBytes": 1})[0], 401)


def test_register_rules(org):
    coach, other = org.client("Coach"), org.client("Coach2")
    data = b"12345"
    p = presign(coach, size=5)["data"]
    body = {"storageKey": p["storageKey"], "filename": "notes.txt", "mimeType": "text/plain",
            "sizeBytes": 5}
    # nothing uploaded yet
    assert_error(coach.call("POST", "/api/files/register", body)[0], 400)
    requests.put(p["presignedUrl"], data=data, headers={"Content-Type": "text/plain"})
    # another user cannot register the key
    assert_error(other.call("POST", "/api/files/register", body)[0], 403)
    # a key never presigned
    assert_error(coach.call("POST", "/api/files/register",
                            dict(body, storageKey="uploads/x/y.txt"))[0], 403)
    # wrong size
    assert_error(coach.call("POST", "/api/files/register", dict(body, sizeBytes=4))[0], 400)
    coach.post_json("/api/files/register", body, expect=201)
    assert_error(coach.call("POST", "/api/files/register", body)[0], 409, "CONFLICT")


def test_local_put_url_is_bound(org):
    c = org.client("Coach")
    p = presign(c, size=5)["data"]
    url = p["presignedUrl"]
    # wrong content type, wrong size
    assert_error(requests.put(url, data=b"12345", headers={"Content-Type": "text/html"}), 403)
    assert_error(requests.put(url, data=b"123456", headers={"Content-Type": "text/plain"}), 403)
    # tampered: another key, another size, another signature
    u = urllib.parse.urlsplit(url)
    q = dict(urllib.parse.parse_qsl(u.query))
    for field, value in (("k", q["k"].replace("notes", "other")), ("n", "6"),
                         ("s", ("0" if q["s"][0] != "0" else "1") + q["s"][1:]),
                         ("e", str(int(q["e"]) + 1))):
        bad = dict(q, **{field: value})
        r = requests.put(u._replace(query=urllib.parse.urlencode(bad)).geturl(),
                         data=b"12345", headers={"Content-Type": "text/plain"})
        assert_error(r, 403)
    # expired
    expired = dict(q, e=str(int(time.time()) - 1))
    r = requests.put(u._replace(query=urllib.parse.urlencode(expired)).geturl(), data=b"12345",
                     headers={"Content-Type": "text/plain"})
    assert_error(r, 403)
    assert requests.put(url, data=b"12345", headers={"Content-Type": "text/plain"}).status_code == 200


def test_local_get_url_tampered_and_expired(org):
    c = org.client("Coach")
    fid, key, _ = upload_presigned(c, b"secret bytes")
    url = c.get_json("/api/files/%s" % fid)["data"]["presignedUrl"]
    u = urllib.parse.urlsplit(url)
    q = dict(urllib.parse.parse_qsl(u.query))
    for field, value in (("f", "evil.html"), ("t", "text/html"), ("e", str(int(q["e"]) + 60)),
                         ("k", key.rsplit("/", 1)[0] + "/other.txt")):
        r = requests.get(u._replace(query=urllib.parse.urlencode(dict(q, **{field: value}))).geturl())
        assert_error(r, 403)
    r = requests.get(u._replace(query=urllib.parse.urlencode(dict(q, e=str(int(time.time()) - 5)))).geturl())
    assert_error(r, 403)
    assert requests.get(url).content == b"secret bytes"


# ---- access ---------------------------------------------------------------------------------


def test_file_access_per_role(org, ment):
    coach = org.client("Coach")
    fid, _, _ = upload_presigned(coach, b"private")
    # uploader reads own file before any attachment; others in the org below Manager do not
    coach.get_json("/api/files/%s" % fid)
    assert_error(org.client("Teacher").call("GET", "/api/files/%s" % fid)[0], 403)
    assert_error(org.client("Coach2").call("GET", "/api/files/%s" % fid)[0], 403)
    org.client("Manager").get_json("/api/files/%s" % fid)
    org.client("OrganizationAdmin").get_json("/api/files/%s" % fid)
    platform_admin(org.id)[0].get_json("/api/files/%s" % fid)
    # another organization's member: 403
    other = new_org(roles=("Manager",))
    assert_error(other.client("Manager").call("GET", "/api/files/%s" % fid)[0], 403, "FORBIDDEN")
    # attached: the mentorship's teacher reads it, the other teacher still does not
    coach.post_json("/api/files/%s/attach" % fid, {"objectType": "mentorship", "objectId": ment["id"]},
                    expect=201)
    org.client("Teacher").get_json("/api/files/%s" % fid)
    assert_error(org.client("Teacher2").call("GET", "/api/files/%s" % fid)[0], 403)
    assert_error(org.client("Teacher2").call(
        "GET", "/api/files/mentorship/%s/attachments" % ment["id"])[0], 403)
    assert_error(other.client("Manager").call(
        "GET", "/api/files/mentorship/%s/attachments" % ment["id"])[0], 403)
    assert_error(coach.call("GET", "/api/files/%s" % "00000000-0000-4000-8000-000000000000")[0], 404)
    assert_error(coach.call("GET", "/api/files/not-a-uuid")[0], 400)
    assert_error(coach.call("GET", "/api/files/mentorship/00000000-0000-4000-8000-000000000000"
                                   "/attachments")[0], 404)


def test_attach_rules(org, ment):
    coach, coach2 = org.client("Coach"), org.client("Coach2")
    fid, _, _ = upload_presigned(coach, b"attach me")
    body = {"objectType": "mentorship", "objectId": ment["id"]}
    # Teacher is below the minimum role; another coach's mentorship
    assert_error(org.client("Teacher").call("POST", "/api/files/%s/attach" % fid, body)[0], 403)
    fid2, _, _ = upload_presigned(coach2, b"other coach")
    assert_error(coach2.call("POST", "/api/files/%s/attach" % fid2, body)[0], 403)
    # validation, 404s
    assert_error(coach.call("POST", "/api/files/%s/attach" % fid,
                            {"objectType": "session", "objectId": ment["id"]})[0], 400)
    assert_error(coach.call("POST", "/api/files/%s/attach" % fid,
                            {"objectType": "mentorship", "objectId": "x"})[0], 400)
    assert_error(coach.call("POST", "/api/files/%s/attach" % fid,
                            {"objectType": "mentorship",
                             "objectId": "00000000-0000-4000-8000-000000000000"})[0], 404)
    assert_error(coach.call("POST", "/api/files/00000000-0000-4000-8000-000000000000/attach",
                            body)[0], 404)
    # Manager attaches on any mentorship of the org; then 409
    org.client("Manager").post_json("/api/files/%s/attach" % fid, body, expect=201)
    assert_error(coach.call("POST", "/api/files/%s/attach" % fid, body)[0], 409, "CONFLICT")
    # a file of another organization cannot be attached here
    other = new_org(roles=("Coach",))
    ofid, _, _ = upload_presigned(other.client("Coach"), b"elsewhere")
    assert_error(org.client("Manager").call("POST", "/api/files/%s/attach" % ofid, body)[0], 403)


def stored_path(key):
    return os.path.join(STORAGE_DIR, key)


def test_detach_last_attachment_deletes_record_and_object(org, ment):
    coach = org.client("Coach")
    m2 = make_mentorship(org, teacher="Teacher2")
    fid, key, _ = upload_presigned(coach, b"to be deleted")
    assert os.path.exists(stored_path(key))
    for m in (ment, m2):
        coach.post_json("/api/files/%s/attach" % fid, {"objectType": "mentorship", "objectId": m["id"]},
                        expect=201)
    assert_error(org.client("Coach2").call(
        "DELETE", "/api/files/%s/attach/mentorship/%s" % (fid, ment["id"]))[0], 403)
    assert_error(coach.call("DELETE", "/api/files/%s/attach/other/%s" % (fid, ment["id"]))[0], 400)
    r, _ = coach.call("DELETE", "/api/files/%s/attach/mentorship/%s" % (fid, ment["id"]))
    assert r.status_code == 204
    assert_error(coach.call("DELETE", "/api/files/%s/attach/mentorship/%s" % (fid, ment["id"]))[0], 404)
    # still attached once: record and object stay
    coach.get_json("/api/files/%s" % fid)
    time.sleep(0.5)
    assert os.path.exists(stored_path(key))
    r, _ = coach.call("DELETE", "/api/files/%s/attach/mentorship/%s" % (fid, m2["id"]))
    assert r.status_code == 204
    assert_error(coach.call("GET", "/api/files/%s" % fid)[0], 404)
    wait_until(lambda: not os.path.exists(stored_path(key)), what="object deleted")


def test_detach_keeps_file_used_as_avatar(org, ment):
    coach = org.client("Coach")
    fid, key, _ = upload_presigned(coach, b"\x89PNG avatar", filename="me.png", mime="image/png")
    coach.post_json("/api/files/%s/attach" % fid, {"objectType": "mentorship", "objectId": ment["id"]},
                    expect=201)
    coach.patch_json("/api/users/%s" % org.uid("Coach"), {"avatar": fid})
    r, _ = coach.call("DELETE", "/api/files/%s/attach/mentorship/%s" % (fid, ment["id"]))
    assert r.status_code == 204
    coach.get_json("/api/files/%s" % fid)
    time.sleep(0.5)
    assert os.path.exists(stored_path(key))


# ---- janitor ------------------------------------------------------------------------------


def test_janitor_deletes_unregistered_after_24h(org):
    c = org.client("Coach")
    p = presign(c, size=3)["data"]
    requests.put(p["presignedUrl"], data=b"abc", headers={"Content-Type": "text/plain"})
    fid, kept, _ = upload_presigned(c, b"registered")
    assert os.path.exists(stored_path(p["storageKey"]))
    psql("UPDATE file_uploads SET created_at = now() - interval '25 hours'"
         " WHERE storage_key IN (:'a', :'b')", a=p["storageKey"], b=kept)
    wait_until(lambda: not os.path.exists(stored_path(p["storageKey"])), timeout=20,
               what="janitor deleted the unregistered object")
    assert os.path.exists(stored_path(kept))
    c.get_json("/api/files/%s" % fid)

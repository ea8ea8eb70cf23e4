"""Files on the local driver: presign -> PUT -> register -> attach -> download, the errors of
docs/api.md "Files", access per role, presigned URL tampering and expiry, detach deleting the record and
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
    # The ASCII fallback: one "_" per character that is not printable ASCII (ñ is 2 bytes).
    assert 'filename="Plan _.txt";' in cd, cd
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


def test_head_of_a_download_says_the_length_a_get_sends(org):
    """HEAD on a download URL answers the GET's head: the file's length, not 0 (RFC 9110 8.6: a
    HEAD's Content-Length is the GET's), and the same headers; no body, and an empty file is 0."""
    coach = org.client("Coach")
    data = b"twelve bytes" * 250
    fid, _, _ = upload_presigned(coach, data, filename="h.txt")
    url = coach.get_json("/api/files/%s" % fid)["data"]["presignedUrl"]
    g = download(url)
    h = requests.head(url)
    assert g.status_code == 200 and int(g.headers["Content-Length"]) == len(data) == len(g.content)
    assert h.status_code == 200 and h.content == b""
    assert int(h.headers["Content-Length"]) == len(data), dict(h.headers)
    for name in ("Content-Type", "Content-Disposition", "Cache-Control", "X-Content-Type-Options"):
        assert h.headers.get(name) == g.headers.get(name), name
    eid, _, _ = upload_presigned(coach, b"", filename="empty.txt")
    url = coach.get_json("/api/files/%s" % eid)["data"]["presignedUrl"]
    h = requests.head(url)
    assert h.status_code == 200 and h.headers["Content-Length"] == "0"


def fields(err):
    return [d["field"] for d in err.get("details", [])]


def test_presign_errors(org):
    c = org.client("Teacher")
    err = assert_error(c.call("POST", "/api/files/presign", {
        "filename": "a", "mimeType": "application/x-msdownload", "sizeBytes": 1})[0], 400,
        "VALIDATION_ERROR")
    assert fields(err) == ["mimeType"], err
    err = assert_error(c.call("POST", "/api/files/presign", {
        "filename": "a.mp4", "mimeType": "video/mp4", "sizeBytes": 500 * 1024 * 1024 + 1})[0],
        413, "PAYLOAD_TOO_LARGE")
    # The limit is 500 MiB (500 * 2^20 bytes), and the message says so in those units.
    assert err["message"] == "Files of type video/mp4 may be at most 500 MiB", err
    presign(c, "a.mp4", "video/mp4", 500 * 1024 * 1024)
    err = assert_error(c.call("POST", "/api/files/presign", {
        "filename": "a.png", "mimeType": "image/png", "sizeBytes": 100 * 1024 * 1024 + 1})[0], 413)
    assert err["message"] == "Files of type image/png may be at most 100 MiB", err
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
    err = assert_error(coach.call("POST", "/api/files/register", body)[0], 400)
    assert fields(err) == ["storageKey"], err
    requests.put(p["presignedUrl"], data=data, headers={"Content-Type": "text/plain"})
    # another user cannot register the key
    assert_error(other.call("POST", "/api/files/register", body)[0], 403)
    # a key never presigned
    assert_error(coach.call("POST", "/api/files/register",
                            dict(body, storageKey="uploads/x/y.txt"))[0], 403)
    # wrong size
    err = assert_error(coach.call("POST", "/api/files/register", dict(body, sizeBytes=4))[0], 400)
    assert fields(err) == ["sizeBytes"], err
    # another type than the one presigned
    err = assert_error(coach.call("POST", "/api/files/register",
                                  dict(body, mimeType="text/html"))[0], 400)
    assert fields(err) == ["mimeType"], err
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


def test_detach_of_a_file_never_attached_keeps_it(org, ment):
    # 404 for a file that is not attached there, and the unattached file (registered, not yet
    # attached anywhere) is neither deleted nor queued for deletion by the refused detach.
    coach = org.client("Coach")
    fid, key, _ = upload_presigned(coach, b"not attached yet")
    assert_error(coach.call("DELETE", "/api/files/%s/attach/mentorship/%s" % (fid, ment["id"]))[0],
                 404)
    assert_error(coach.call(
        "DELETE", "/api/files/00000000-0000-4000-8000-000000000000/attach/mentorship/%s"
        % ment["id"])[0], 404)
    coach.get_json("/api/files/%s" % fid)
    time.sleep(0.5)
    assert os.path.exists(stored_path(key))
    coach.post_json("/api/files/%s/attach" % fid, {"objectType": "mentorship", "objectId": ment["id"]},
                    expect=201)


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


# ---- multipart upload -----------------------------------------------------------------------


def multipart_body(parts, boundary="----coachdTestBoundary7MA4YWxk"):
    """parts: list of (name, filename or None, content type or None, bytes)."""
    out = []
    for name, filename, ctype, data in parts:
        out.append(b"--" + boundary.encode() + b"\r\n")
        cd = 'Content-Disposition: form-data; name="%s"' % name
        if filename is not None:
            cd += '; filename="%s"' % filename
        out.append(cd.encode() + b"\r\n")
        if ctype:
            out.append(("Content-Type: %s\r\n" % ctype).encode())
        out.append(b"\r\n" + data + b"\r\n")
    out.append(b"--" + boundary.encode() + b"--\r\n")
    return b"".join(out), "multipart/form-data; boundary=%s" % boundary


def upload(client, parts, expect=201):
    body, ctype = multipart_body(parts)
    r = client.post(client.base_url + "/api/files/upload", data=body, headers={"Content-Type": ctype})
    if expect is not None:
        assert r.status_code == expect, r.text
    return r


def tmp_entries():
    d = os.path.join(STORAGE_DIR, ".tmp")
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def test_multipart_upload_fields_after_file_and_download(org, ment):
    coach = org.client("Coach")
    data = os.urandom(3 * 1024 * 1024 + 17)  # several writer buffers
    r = upload(coach, [("file", "video clip.mp4", "video/mp4", data), ("prefix", None, None, b"coach/videos")])
    d = r.json()["data"]
    assert d["sha256Hash"] == hashlib.sha256(data).hexdigest()
    assert d["sizeBytes"] == len(data) and d["mimeType"] == "video/mp4"
    assert d["storageKey"].startswith("coach/videos/") and d["storageKey"].endswith("/video_clip.mp4")
    coach.post_json("/api/files/%s/attach" % d["fileId"],
                    {"objectType": "mentorship", "objectId": ment["id"]}, expect=201)
    f = org.client("Teacher").get_json("/api/files/%s" % d["fileId"])["data"]
    got = download(f["presignedUrl"])
    assert got.content == data and hashlib.sha256(got.content).hexdigest() == f["sha256Hash"]
    assert got.headers["Content-Length"] == str(len(data))


def test_multipart_upload_with_requests_and_charset(org):
    c = org.client("Teacher")
    r = c.post(c.base_url + "/api/files/upload", data={"prefix": "notes"},
               files={"file": ("n.txt", b"plain text", "text/plain; charset=utf-8")})
    assert r.status_code == 201, r.text
    d = r.json()["data"]
    assert d["mimeType"] == "text/plain" and d["storageKey"].startswith("notes/")
    assert download(c.get_json("/api/files/%s" % d["fileId"])["data"]["presignedUrl"]).content == b"plain text"


def test_multipart_upload_errors(org):
    c = org.client("Coach")
    assert_error(upload(c, [("prefix", None, None, b"x")], expect=None), 400, "VALIDATION_ERROR")
    err = assert_error(upload(c, [("file", "a.exe", "application/x-msdownload", b"MZ")],
                              expect=None), 400)
    assert fields(err) == ["file"], err
    err = assert_error(upload(c, [("file", "a.bin", None, b"MZ")], expect=None), 400)
    assert fields(err) == ["file"], err
    err = assert_error(upload(c, [("file", "a.txt", "text/plain", b"x"),
                                  ("file", "b.txt", "text/plain", b"y")], expect=None), 400)
    assert fields(err) == ["file"], err
    err = assert_error(upload(c, [("file", "", "text/plain", b"x")], expect=None), 400)
    assert fields(err) == ["file"], err
    assert_error(upload(c, [("file", "a.txt", "text/plain", b"x"), ("prefix", None, None, b"../up")],
                        expect=None), 400)
    assert_error(upload(c, [("file", "a.txt", "text/plain", b"x"), ("target", None, None, b"other")],
                        expect=None), 400)
    assert_error(upload(c, [("file", "a.txt", "text/plain", b"x"), ("target", None, None, b"avatar")],
                        expect=None), 400)
    r = c.post(c.base_url + "/api/files/upload", data=b"{}", headers={"Content-Type": "application/json"})
    assert_error(r, 415, "UNSUPPORTED_MEDIA_TYPE")
    body, ctype = multipart_body([("file", "a.txt", "text/plain", b"abc")])
    r = c.post(c.base_url + "/api/files/upload", data=body[:-10], headers={"Content-Type": ctype})
    assert_error(r, 400)
    assert_error(Client().call("POST", "/api/files/upload")[0], 401)
    wait_until(lambda: tmp_entries() == [], what="temporary files removed")


def test_multipart_413_while_streaming(org):
    c = org.client("Coach")
    limit = 100 * 1024 * 1024
    boundary = "b0undary"
    head = ('--%s\r\nContent-Disposition: form-data; name="file"; filename="big.png"\r\n'
            'Content-Type: image/png\r\n\r\n' % boundary).encode()
    tail = ("\r\n--%s--\r\n" % boundary).encode()
    chunk = b"\0" * (1024 * 1024)

    def gen():
        yield head
        for _ in range(limit // len(chunk)):
            yield chunk
        yield b"x" * 1024
        yield tail

    before = psql_value("SELECT count(*) FROM files")
    r = c.post(c.base_url + "/api/files/upload", data=gen(),
               headers={"Content-Type": "multipart/form-data; boundary=%s" % boundary})
    err = assert_error(r, 413, "PAYLOAD_TOO_LARGE")
    assert err["message"] == "Files of type image/png may be at most 100 MiB", err
    wait_until(lambda: tmp_entries() == [], what="partial upload removed")
    assert psql_value("SELECT count(*) FROM files") == before


def test_upload_cut_off_mid_stream_leaves_nothing(org):
    c = org.client("Coach")
    boundary = "cutoff"
    head = ('--%s\r\nContent-Disposition: form-data; name="file"; filename="cut.mp4"\r\n'
            'Content-Type: video/mp4\r\n\r\n' % boundary).encode()
    total = 50 * 1024 * 1024
    u = urllib.parse.urlsplit(BASE_URL)
    s = socket.create_connection((u.hostname, u.port))
    cookie = "auth.session_token=%s" % c.session_token
    req = ("POST /api/files/upload HTTP/1.1\r\nHost: x\r\nCookie: %s\r\nX-Organization-Id: %s\r\n"
           "Content-Type: multipart/form-data; boundary=%s\r\nContent-Length: %d\r\n\r\n"
           % (cookie, org.id, boundary, len(head) + total)).encode()
    s.sendall(req + head)
    sent = 0
    while sent < 5 * 1024 * 1024:
        s.sendall(b"\1" * 65536)
        sent += 65536
    wait_until(lambda: tmp_entries() != [], what="upload in progress")
    before = psql_value("SELECT count(*) FROM files")
    s.close()
    wait_until(lambda: tmp_entries() == [], what="partial upload removed")
    assert psql_value("SELECT count(*) FROM files") == before


# ---- avatars and logos ----------------------------------------------------------------------


def test_avatar_upload_and_rendering(org):
    c = org.client("Teacher")
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(2000)
    d = upload(c, [("target", None, None, b"avatar"), ("file", "me.png", "image/png", png)]).json()["data"]
    me = c.get_json("/api/users/me")["data"]
    assert me["avatarUrl"] and me["avatarUrl"].startswith("http"), me
    assert download(me["avatarUrl"]).content == png
    assert psql_value("SELECT avatar_file_id::text FROM users WHERE id = :'id'", id=org.uid("Teacher")) == d["fileId"]
    # shown elsewhere too: user by id, as seen by a manager
    u = org.client("Manager").get_json("/api/users/%s" % org.uid("Teacher"))["data"]
    assert download(u["avatarUrl"]).content == png
    # a new avatar replaces the old one, whose record and object go
    png2 = b"\x89PNG\r\n\x1a\n" + os.urandom(500)
    upload(c, [("file", "me2.png", "image/png", png2), ("target", None, None, b"avatar")])
    assert download(c.get_json("/api/users/me")["data"]["avatarUrl"]).content == png2
    assert_error(c.call("GET", "/api/files/%s" % d["fileId"])[0], 404)
    wait_until(lambda: not os.path.exists(stored_path(d["storageKey"])), what="old avatar deleted")


def test_avatar_in_cached_list_pages_is_a_fresh_url(org, ment):
    """List pages are cached as stored, with references; a page holding one is rendered when
    sent, also when it comes from the cache (a page without any skips that scan)."""
    m = ment
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(300)
    upload(org.client("Teacher"), [("target", None, None, b"avatar"), ("file", "t.png", "image/png", png)])
    mgr = org.client("Manager")
    for _ in range(3):  # the first read fills the cache, the others are served from it
        page = mgr.get_json("/api/mentorships?limit=50")["data"]
        url = next(x for x in page if x["id"] == m["id"])["teacher"]["avatarUrl"]
        assert url.startswith("http"), url
        assert download(url).content == png
        members = mgr.get_json("/api/organizations/%s/users?limit=100" % org.id)["data"]
        url = next(x for x in members if x["id"] == org.uid("Teacher"))["avatarUrl"]
        assert url.startswith("http") and download(url).content == png


def test_patch_user_avatar(org):
    c = org.client("Coach2")
    fid, key, _ = upload_presigned(c, b"\x89PNGavatar", filename="a.png", mime="image/png")
    c.patch_json("/api/users/%s" % org.uid("Coach2"), {"avatar": fid})
    assert download(c.get_json("/api/users/me")["data"]["avatarUrl"]).content == b"\x89PNGavatar"
    # not an image, not readable, unknown
    tid, _, _ = upload_presigned(c, b"text")
    assert_error(c.call("PATCH", "/api/users/%s" % org.uid("Coach2"), {"avatar": tid})[0], 400)
    other, _, _ = upload_presigned(org.client("Coach"), b"\x89PNGx", filename="o.png", mime="image/png")
    assert_error(c.call("PATCH", "/api/users/%s" % org.uid("Coach2"), {"avatar": other})[0], 403)
    assert_error(c.call("PATCH", "/api/users/%s" % org.uid("Coach2"),
                        {"avatar": "00000000-0000-4000-8000-000000000000"})[0], 404)
    # clearing
    c.patch_json("/api/users/%s" % org.uid("Coach2"), {"avatar": None})
    assert c.get_json("/api/users/me")["data"]["avatarUrl"] is None


def test_patch_me_avatar_is_applied_like_by_id(org):
    """`avatar` on PATCH /api/users/me is the same rule as on PATCH /api/users/:id: applied,
    refused with the same statuses, cleared by null; never accepted and dropped."""
    c = org.client("Teacher2")
    uid = org.uid("Teacher2")
    png, _, _ = upload_presigned(c, b"\x89PNGme", filename="me.png", mime="image/png")
    d = c.patch_json("/api/users/me", {"avatar": png})["data"]
    assert d["avatarUrl"] and download(d["avatarUrl"]).content == b"\x89PNGme"
    assert download(c.get_json("/api/users/me")["data"]["avatarUrl"]).content == b"\x89PNGme"
    assert psql_value("SELECT avatar_file_id FROM users WHERE id = :'u'", u=uid) == png
    tid, _, _ = upload_presigned(c, b"text")
    other, _, _ = upload_presigned(org.client("Coach"), b"\x89PNGo", filename="o.png",
                                   mime="image/png")
    for path in ("/api/users/me", "/api/users/%s" % uid):
        err = assert_error(c.call("PATCH", path, {"avatar": tid})[0], 400, "VALIDATION_ERROR")
        assert [x["field"] for x in err["details"]] == ["avatar"], err
        err = assert_error(c.call("PATCH", path, {"avatar": "not-a-file"})[0], 400)
        assert [x["field"] for x in err["details"]] == ["avatar"], err
        assert_error(c.call("PATCH", path, {"avatar": other})[0], 403)
        assert_error(c.call("PATCH", path, {"avatar": "00000000-0000-4000-8000-000000000000"})[0],
                     404)
    # A refused avatar changes nothing else.
    assert c.get_json("/api/users/me")["data"]["avatarUrl"]
    assert c.patch_json("/api/users/me", {"avatar": None})["data"]["avatarUrl"] is None
    assert psql_value("SELECT avatar_file_id FROM users WHERE id = :'u'", u=uid) is None


def test_forged_storage_reference_is_not_rendered(org):
    c = org.client("Coach")
    fid, key, _ = upload_presigned(c, b"secret", filename="s.png", mime="image/png")
    forged = "storage:image/png:%s:%s" % (key, "0" * 32)
    c2 = org.client("Teacher2")
    c2.patch_json("/api/users/me", {"firstName": forged[:100]})
    psql("UPDATE users SET avatar_url = :'v' WHERE id = :'id'", v=forged, id=org.uid("Teacher2"))
    me = c2.get_json("/api/users/me")["data"]
    assert me["avatarUrl"] == forged and me["firstName"] == forged[:100]


def test_org_logo_upload(org):
    png = b"\x89PNGlogo" + os.urandom(100)
    parts = [("target", None, None, b"orgLogo"), ("organizationId", None, None, org.id.encode()),
             ("file", "logo.png", "image/png", png)]
    assert_error(upload(org.client("Manager"), parts, expect=None), 403)
    upload(org.client("OrganizationAdmin"), parts)
    cur = org.client("Teacher").get_json("/api/me/current-organization")["data"]
    assert download(cur["logoUrl"]).content == png
    pa = platform_admin(org.id)[0]
    png2 = b"\x89PNGlogo2"
    upload(pa, parts[:2] + [("file", "logo2.png", "image/png", png2)])
    assert download(org.client("Teacher").get_json("/api/me/current-organization")["data"]["logoUrl"]).content == png2
    assert_error(upload(org.client("OrganizationAdmin"),
                        [("target", None, None, b"orgLogo"), ("file", "l.png", "image/png", png)],
                        expect=None), 400)


def test_empty_file_roundtrip(org):
    c = org.client("Coach")
    fid, _, reg = upload_presigned(c, b"", filename="empty.txt")
    assert reg["sha256Hash"] == hashlib.sha256(b"").hexdigest()
    r = download(c.get_json("/api/files/%s" % fid)["data"]["presignedUrl"])
    assert r.status_code == 200 and r.content == b""
    assert r.headers["Content-Length"] == "0"


def test_presign_names_the_upload_headers(org):
    # The local driver binds the PUT to its Content-Type (and size); If-None-Match is the s3
    # driver's (test_files_s3.py). A client that sends uploadHeaders as given is served.
    c = org.client("Coach")
    p = presign(c, "h.txt", "Text/Plain", 3)["data"]
    assert p["uploadHeaders"] == {"Content-Type": "text/plain"}
    r = requests.put(p["presignedUrl"], data=b"abc", headers=p["uploadHeaders"])
    assert r.status_code in (200, 204), r.text

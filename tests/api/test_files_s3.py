"""Files on the s3 driver against s3rver (started by scripts/test). s3rver (3.7) does not check
SigV4 signatures at all (it accepts any X-Amz-Signature) and ignores If-None-Match on PUT, so
neither a wrong signature, a missing signed header nor an overwrite is refused here as AWS S3
refuses them. Signing is proven against the AWS SDK instead: test_sigv4_sdk.py for the signer,
and below for the URL of a real presign with the uploadHeaders it names. Here also:
a second coachd with STORAGE_DRIVER=s3 runs presign -> PUT to the bucket -> register (HEAD and
a streamed GET for the hash, header-signed) -> attach -> presigned GET, the multipart upload
(temporary file then PUT), detach deleting the object through the outbox, the health probe
(HEAD bucket), and the local driver's probe file."""
import hashlib
import json
import os
import subprocess
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from helpers import assert_error, second_coachd, wait_until
from ment_fixtures import make_mentorship
from orgs import new_org

S3 = os.environ.get("COACHD_S3_ENDPOINT")
pytestmark = pytest.mark.skipif(not S3, reason="s3rver not started (scripts/test starts it)")
BUCKET = "coach-files"


@pytest.fixture(scope="module")
def s3_base():
    with second_coachd(STORAGE_DRIVER="s3", S3_ENDPOINT=S3, S3_REGION="us-east-1",
                       S3_BUCKET=BUCKET, S3_ACCESS_KEY_ID="S3RVER", S3_SECRET_ACCESS_KEY="S3RVER",
                       S3_FORCE_PATH_STYLE="true") as base:
        yield base


@pytest.fixture(scope="module")
def org():
    return new_org()


def on(client, base):
    client.base_url = base
    return client


def test_s3_presign_put_register_attach_download(s3_base, org):
    coach = on(org.client("Coach"), s3_base)
    ment = make_mentorship(org)
    data = os.urandom(700 * 1024) + "ñ+ end".encode()
    p = coach.post_json("/api/files/presign", {"filename": "a b+ñ.pdf", "mimeType": "application/pdf",
                                               "sizeBytes": len(data)})["data"]
    assert p["presignedUrl"].startswith(S3 + "/" + BUCKET + "/uploads/")
    # The URL signs content-type, content-length and if-none-match (SignedHeaders; the signature
    # is compared with the AWS SDK's below); s3rver does not enforce signed headers, AWS S3 does.
    assert "X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost%3Bif-none-match" in \
        p["presignedUrl"]
    assert p["uploadHeaders"] == {"Content-Type": "application/pdf", "If-None-Match": "*"}
    r = requests.put(p["presignedUrl"], data=data, headers=p["uploadHeaders"])
    assert r.status_code == 200, r.text
    reg = coach.post_json("/api/files/register", {"storageKey": p["storageKey"], "filename": "a b+ñ.pdf",
                                                  "mimeType": "application/pdf", "sizeBytes": len(data)},
                          expect=201)["data"]
    assert reg["sha256Hash"] == hashlib.sha256(data).hexdigest()
    assert_error(coach.call("POST", "/api/files/register", {"storageKey": p["storageKey"], "filename": "x",
                                                            "mimeType": "application/pdf",
                                                            "sizeBytes": len(data)})[0], 409)
    coach.post_json("/api/files/%s/attach" % reg["fileId"],
                    {"objectType": "mentorship", "objectId": ment["id"]}, expect=201)
    f = on(org.client("Teacher"), s3_base).get_json("/api/files/%s" % reg["fileId"])["data"]
    got = requests.get(f["presignedUrl"])
    assert got.status_code == 200, got.text
    assert got.content == data and hashlib.sha256(got.content).hexdigest() == f["sha256Hash"]
    assert got.headers["Content-Disposition"].startswith("attachment;")
    assert "filename*=UTF-8''a%20b%2B%C3%B1.pdf" in got.headers["Content-Disposition"]
    assert got.headers["Content-Type"] == "application/pdf"
    # detach: the last attachment goes, the record goes, the object is deleted after commit
    r, _ = coach.call("DELETE", "/api/files/%s/attach/mentorship/%s" % (reg["fileId"], ment["id"]))
    assert r.status_code == 204
    wait_until(lambda: requests.get(f["presignedUrl"]).status_code == 404, timeout=15,
               what="object deleted from the bucket")


def sdk_presign(case):
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run(["node", os.path.join(here, "presign_s3.js"), json.dumps(case)],
                          check=True, capture_output=True, text=True, cwd=here).stdout.strip()


def test_s3_presigned_put_is_the_sdks_for_its_upload_headers(s3_base, org):
    """A registered key's bytes never change (docs/api.md "Files"): the presigned PUT is bound to
    If-None-Match: *, so AWS S3 answers 412 to a replay once the object exists. s3rver enforces
    neither the signature nor the condition, so this checks what decides it on S3: the URL coachd
    answers is, byte for byte, the one the AWS SDK presigns for a PUT that sends exactly the
    uploadHeaders coachd names (plus Content-Length = sizeBytes), and differs from the SDK's URL
    for the same PUT without If-None-Match (a request without the header fails S3's signature
    check)."""
    c = on(org.client("Coach"), s3_base)
    p = c.post_json("/api/files/presign", {"filename": "r é.pdf", "mimeType": "application/pdf",
                                           "sizeBytes": 4321})["data"]
    q = parse_qs(urlsplit(p["presignedUrl"]).query)
    case = {"method": "PUT", "endpoint": S3, "region": "us-east-1", "bucket": BUCKET,
            "key": p["storageKey"], "access": "S3RVER", "secret": "S3RVER",
            "date": q["X-Amz-Date"][0], "expires": int(q["X-Amz-Expires"][0]), "path_style": True,
            "content_length": 4321}
    headers = {k.lower(): v for k, v in p["uploadHeaders"].items()}
    assert set(headers) == {"content-type", "if-none-match"}
    signed = dict(case, content_type=headers["content-type"],
                  if_none_match=headers["if-none-match"])
    assert sdk_presign(signed) == p["presignedUrl"]
    unconditional = sdk_presign(dict(case, content_type=headers["content-type"]))
    assert unconditional != p["presignedUrl"]
    assert "X-Amz-SignedHeaders=content-length%3Bcontent-type%3Bhost&" in unconditional


def test_aws_sdk_round_trip_through_coachd(s3_base, org):
    """The AWS SDK for JavaScript on the storage side of an app's upload and download through
    coachd (tests/api/s3_sdk_client.js): the bytes PUT to coachd's presigned URL are what the
    SDK reads from the bucket and what GET /api/files/:id serves; an object the SDK put under a
    key coachd presigned is registered and served by coachd."""
    coach = org.client("Coach")
    arg = {"base": s3_base, "token": coach.session_token, "org": org.id, "s3": S3,
           "bucket": BUCKET, "access": "S3RVER", "secret": "S3RVER"}
    here = os.path.dirname(os.path.abspath(__file__))
    assert os.path.isdir(os.path.join(here, "node_modules", "@aws-sdk", "client-s3")), \
        "run `npm ci` in tests/api first (scripts/test does)"
    out = subprocess.run(["node", os.path.join(here, "s3_sdk_client.js"), json.dumps(arg)],
                         cwd=here, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["ok"] and len(res["checks"]) == 15, res


def test_s3_register_checks_object(s3_base, org):
    c = on(org.client("Teacher"), s3_base)
    p = c.post_json("/api/files/presign", {"filename": "n.txt", "mimeType": "text/plain",
                                           "sizeBytes": 3})["data"]
    body = {"storageKey": p["storageKey"], "filename": "n.txt", "mimeType": "text/plain", "sizeBytes": 3}
    assert_error(c.call("POST", "/api/files/register", body)[0], 400)
    assert requests.put(p["presignedUrl"], data=b"abc", headers={"Content-Type": "text/plain"}).status_code == 200
    assert_error(c.call("POST", "/api/files/register", dict(body, sizeBytes=4))[0], 400)
    c.post_json("/api/files/register", body, expect=201)


def test_s3_multipart_upload(s3_base, org):
    c = on(org.client("Coach"), s3_base)
    data = os.urandom(2 * 1024 * 1024 + 3)
    r = c.post(s3_base + "/api/files/upload", data={"prefix": "s3/up"},
               files={"file": ("clip.mp4", data, "video/mp4")})
    assert r.status_code == 201, r.text
    d = r.json()["data"]
    assert d["sha256Hash"] == hashlib.sha256(data).hexdigest() and d["storageKey"].startswith("s3/up/")
    f = c.get_json("/api/files/%s" % d["fileId"])["data"]
    assert requests.get(f["presignedUrl"]).content == data


def test_s3_health_probes_bucket(s3_base, org):
    h = requests.get(s3_base + "/api/health", headers={"X-Client-Key": os.environ["COACHD_CLIENT_KEY"]})
    assert h.json()["checks"]["storage"] == "ok"
    with second_coachd(STORAGE_DRIVER="s3", S3_ENDPOINT=S3, S3_REGION="us-east-1",
                       S3_BUCKET="no-such-bucket", S3_ACCESS_KEY_ID="S3RVER",
                       S3_SECRET_ACCESS_KEY="S3RVER", S3_FORCE_PATH_STYLE="true") as base:
        h = requests.get(base + "/api/health", headers={"X-Client-Key": os.environ["COACHD_CLIENT_KEY"]})
        assert h.json()["checks"]["storage"] == "error"


def test_local_health_probe_writes(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    key = {"X-Client-Key": os.environ["COACHD_CLIENT_KEY"]}
    with second_coachd(STORAGE_DIR=str(ro), HEALTH_PROBE_CACHE_SECONDS=1) as base:
        assert requests.get(base + "/api/health", headers=key).json()["checks"]["storage"] == "ok"
        assert os.listdir(ro) == []  # the probe file was removed
        # The storage folder turns into a plain file: no user, root included, can write below
        # it, so the probe really has to fail.
        os.rmdir(ro)
        ro.write_bytes(b"not a folder")
        try:
            # Probe results are reused for HEALTH_PROBE_CACHE_SECONDS (1 s here, 30 by default).
            wait_until(lambda: requests.get(base + "/api/health", headers=key).json()
                       ["checks"]["storage"] == "error", timeout=40, what="storage check error")
        finally:
            ro.unlink()
            ro.mkdir()

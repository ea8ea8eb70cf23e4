"""A feature that is not configured answers 503 UNAVAILABLE with a message that names the
variables to set (video and chat tokens: tests/api/test_sessions.py and test_chat_more.py; the
first run's SETUP_TOKEN: test_first_run_ops.py; /metrics' METRICS_TOKEN: test_metrics.py)."""
from helpers import Client, assert_error, second_coachd
from orgs import new_org

S3_UNSET = dict(S3_BUCKET=None, S3_ACCESS_KEY_ID=None, S3_SECRET_ACCESS_KEY=None)


def as_coach(org, base):
    c = Client(base_url=base, org_id=org.id)
    c.cookies.update(org.client("Coach").cookies)
    return c


def presign(c):
    return c.post("/api/files/presign",
                  json={"filename": "a.txt", "mimeType": "text/plain", "sizeBytes": 3})


def test_s3_storage_without_credentials_names_them():
    org = new_org()
    with second_coachd(STORAGE_DRIVER="s3", **S3_UNSET) as base:
        c = as_coach(org, base)
        err = assert_error(presign(c), 503, "UNAVAILABLE")
        assert err["message"] == ("Storage is not configured: set S3_BUCKET, S3_ACCESS_KEY_ID and "
                                  "S3_SECRET_ACCESS_KEY (STORAGE_DRIVER=s3)"), err
        r = c.post("/api/files/upload", files={"file": ("a.txt", b"abc", "text/plain")})
        assert assert_error(r, 503, "UNAVAILABLE")["message"] == err["message"]


def test_s3_storage_names_only_the_missing_variable():
    org = new_org()
    with second_coachd(STORAGE_DRIVER="s3", S3_BUCKET="b", S3_ACCESS_KEY_ID="k",
                       S3_SECRET_ACCESS_KEY=None) as base:
        err = assert_error(presign(as_coach(org, base)), 503, "UNAVAILABLE")
        assert err["message"] == ("Storage is not configured: set S3_SECRET_ACCESS_KEY "
                                  "(STORAGE_DRIVER=s3)"), err

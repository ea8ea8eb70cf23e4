"""GET /api/health: client key, the six checks and the env block, and its one rule: 200 "ok"
exactly when every check is "ok", else 503 "degraded", in development as in production."""
import os

import requests

from helpers import Client, assert_error, second_coachd


def test_health_shape(client_key):
    r = Client().get("/api/health", headers={"X-Client-Key": client_key})
    assert r.status_code == 200, r.text
    b = r.json()
    assert b["status"] == "ok"
    assert b["version"] == "0.1.0"
    assert set(b["checks"]) == {"database", "cache", "storage", "mail", "video", "env"}
    assert b["checks"]["database"] == "ok" and b["checks"]["cache"] == "ok"
    assert b["env"]["environment"] == "development"
    assert isinstance(b["env"]["missingRequired"], list)
    assert isinstance(b["env"]["missingGroups"], list)


def test_health_every_check_ok_is_200(client_key):
    r = Client().get("/api/health", headers={"X-Client-Key": client_key})
    b = r.json()
    assert set(b["checks"].values()) == {"ok"}, b
    assert r.status_code == 200 and b["status"] == "ok", r.text


def test_health_one_failing_check_is_503_in_development_too():
    key = {"X-Client-Key": os.environ["COACHD_CLIENT_KEY"]}
    with second_coachd(VIDEO_APP_ID=None, VIDEO_APP_CERTIFICATE=None, APP_ENV="development") as base:
        r = requests.get(base + "/api/health", headers=key, timeout=30)
        b = r.json()
        assert r.status_code == 503, r.text
        assert b["status"] == "degraded"
        assert b["env"]["environment"] == "development"
        assert b["checks"]["video"] == "error"
        # Every other check passes: video alone makes it 503.
        assert {k for k, v in b["checks"].items() if v != "ok"} == {"video"}, b
        # The env requirement is enforced only in production; development still names what is
        # missing.
        assert b["checks"]["env"] == "ok"
        assert {"VIDEO_APP_ID", "VIDEO_APP_CERTIFICATE"} <= set(b["env"]["missingRequired"])
        assert "video" in b["env"]["missingGroups"]


def test_health_needs_client_key():
    assert_error(Client().get("/api/health"), 401, "UNAUTHENTICATED")
    assert_error(Client().get("/api/health", headers={"X-Client-Key": "nope"}), 401)

"""GET /api/health: client key, the six checks and the env block."""
from helpers import Client, assert_error


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


def test_health_needs_client_key():
    assert_error(Client().get("/api/health"), 401, "UNAUTHENTICATED")
    assert_error(Client().get("/api/health", headers={"X-Client-Key": "nope"}), 401)

"""POST /api/setup/first-run: creates the first PlatformAdmin exactly once. This file runs first
(its name sorts first) so the database has no administrator yet."""
import concurrent.futures

from helpers import Client, PASSWORD, assert_error, psql_value, sign_in, unique_email


def test_first_run_validation():
    c = Client()
    r = c.post("/api/setup/first-run", json={"email": "not-an-email", "password": "short"})
    err = assert_error(r, 400, "VALIDATION_ERROR")
    fields = {d["field"] for d in err["details"]}
    assert fields == {"email", "password", "name"}, err


def test_first_run_once_even_when_concurrent():
    assert psql_value("SELECT count(*) FROM users WHERE global_role IS NOT NULL") == "0"
    emails = [unique_email("admin") for _ in range(8)]

    def attempt(email):
        with Client() as c:
            return c.post("/api/setup/first-run",
                          json={"email": email, "password": PASSWORD, "name": "Ada Admin"})

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = list(pool.map(attempt, emails))
    created = [r for r in results if r.status_code == 201]
    assert len(created) == 1, [r.status_code for r in results]
    for r in results:
        if r.status_code != 201:
            assert_error(r, 409)
    data = created[0].json()["data"]
    assert data["globalRole"] == "PlatformAdmin"
    assert data["firstName"] == "Ada" and data["lastName"] == "Admin"
    assert psql_value("SELECT count(*) FROM users WHERE global_role IS NOT NULL") == "1"

    # The administrator signs in and is a PlatformAdmin everywhere.
    c, _ = sign_in(data["email"])
    me = c.get_json("/api/users/me")["data"]
    assert me["globalRole"] == "PlatformAdmin" and me["role"] == "PlatformAdmin"

    # Later calls are refused.
    r = Client().post("/api/setup/first-run",
                      json={"email": unique_email("late"), "password": PASSWORD, "name": "Late"})
    assert_error(r, 409)

"""The first administrator, as an operator makes it. In production POST /api/setup/first-run
needs X-Setup-Token equal to SETUP_TOKEN (403 FORBIDDEN while it is unset or different, before
the body is read); development keeps the public route (test_00_setup.py). `coachd first-run`
creates the first PlatformAdmin from the command line with the route's rules. Each test gets a
database of its own, where nobody has initialized the platform yet."""
import contextlib
import os
import subprocess
import uuid

from helpers import (MAIL_DIR, PASSWORD, REDIS_URL, ROOT, Client, assert_error, free_port,
                     psql_at, second_coachd, temp_database, unique_email)

BIN = os.environ.get("COACHD_BIN") or os.path.join(ROOT, "build", "coachd")
# A Redis database of these tests' own (the first-run limiter keeps its counters there).
REDIS_OWN = REDIS_URL.rsplit("/", 1)[0] + "/7"


@contextlib.contextmanager
def prod_server(db_url, **env):
    port = free_port()
    with second_coachd(PORT=port, DATABASE_URL=db_url, REDIS_URL=REDIS_OWN, APP_ENV="production",
                       CLIENT_KEY="k", PUBLIC_URL="http://127.0.0.1:%d" % port,
                       FRONTEND_URL="http://app.example", TRUSTED_ORIGINS="http://app.example",
                       MAIL_DIR=MAIL_DIR, **env) as base:
        yield base


def first_run(base, headers=None, body=None):
    body = body or {"email": unique_email("admin"), "password": PASSWORD, "name": "Ada Admin"}
    return Client(base_url=base).post("/api/setup/first-run", json=body, headers=headers or {})


def admins(url):
    return psql_at(url, "SELECT count(*) FROM users WHERE global_role IS NOT NULL")[0][0]


def test_production_refuses_first_run_without_setup_token():
    with temp_database() as url, prod_server(url, SETUP_TOKEN=None) as base:
        err = assert_error(first_run(base), 403, "FORBIDDEN")
        # The message names what to do: the variable to set, or the command.
        assert "set SETUP_TOKEN" in err["message"] and "coachd first-run" in err["message"], err
        assert_error(first_run(base, {"X-Setup-Token": ""}), 403, "FORBIDDEN")
        assert_error(first_run(base, {"X-Setup-Token": "anything"}), 403, "FORBIDDEN")
        assert admins(url) == "0"


def test_production_first_run_needs_the_setup_token():
    token = uuid.uuid4().hex
    with temp_database() as url, prod_server(url, SETUP_TOKEN=token) as base:
        err = assert_error(first_run(base), 403, "FORBIDDEN")
        assert "X-Setup-Token" in err["message"] and "SETUP_TOKEN" in err["message"], err
        assert_error(first_run(base, {"X-Setup-Token": token[:-1] + "x"}), 403, "FORBIDDEN")
        assert_error(first_run(base, {"X-Setup-Token": token + "x"}), 403, "FORBIDDEN")
        assert_error(first_run(base, {"X-Setup-Token": token[:8]}), 403, "FORBIDDEN")
        # Refused before the body is looked at: an invalid one is 403 too, not 400.
        assert_error(first_run(base, body={"email": "nope"}), 403, "FORBIDDEN")
        assert admins(url) == "0"

        email = unique_email("admin")
        r = first_run(base, {"X-Setup-Token": token},
                      {"email": email, "password": PASSWORD, "name": "Ada Admin"})
        assert r.status_code == 201, r.text
        assert r.json()["data"]["globalRole"] == "PlatformAdmin"
        c = Client(base_url=base)
        r = c.post("/api/auth/sign-in/email", json={"email": email, "password": PASSWORD})
        assert r.status_code == 200, r.text
        assert_error(first_run(base, {"X-Setup-Token": token}), 409, "CONFLICT")
        assert admins(url) == "1"


def test_development_keeps_first_run_public_even_with_a_setup_token():
    with temp_database() as url, second_coachd(DATABASE_URL=url, REDIS_URL=REDIS_OWN,
                                               SETUP_TOKEN="not-asked-for") as base:
        r = first_run(base)
        assert r.status_code == 201, r.text


def cli(url, *args, stdin=PASSWORD + "\n"):
    env = dict(os.environ, DATABASE_URL=url)
    return subprocess.run([BIN, "first-run", *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=60)


def test_cli_refuses_bad_input_before_touching_the_database():
    with temp_database() as url:
        email = unique_email("cli")
        name = ("--email", email, "--name", "Grace Hopper")
        r = cli(url, *name, stdin="")
        assert r.returncode == 2 and "no password" in r.stderr, r
        r = cli(url, *name, stdin="short\n")
        assert r.returncode == 2 and "8 to 128" in r.stderr, r
        for args in (("--name", "Grace Hopper"), ("--email", email),
                     ("--email", "not-an-email", "--name", "Grace Hopper"),
                     name + ("--language", "fr"), name + ("--bogus",), name + ("extra",),
                     ("--email", email, "--name", "   ")):
            r = cli(url, *args)
            assert r.returncode == 2 and "usage: coachd first-run" in r.stderr, (args, r)
        # None of these got as far as the migrations.
        assert psql_at(url, "SELECT count(*) FROM pg_tables WHERE tablename = 'users'") == [("0",)]


def test_cli_creates_the_first_admin_once():
    with temp_database() as url:
        email = unique_email("cli")
        # The migrations come first (a fresh database), the address is stored lower-cased, the
        # name is split like the route's, the line ending is not part of the password.
        r = cli(url, "--email", email.replace("cli", "CLI"), "--name", "Grace Brewster Hopper",
                "--language", "es", stdin=PASSWORD + "\r\n")
        assert r.returncode == 0, r
        uid = r.stdout.strip()
        assert uid and "\n" not in uid, r.stdout
        rows = psql_at(url, "SELECT id, email, first_name, last_name, global_role, "
                            "preferred_language FROM users")
        assert rows == [(uid, email, "Grace", "Brewster Hopper", "PlatformAdmin", "es")], rows

        with second_coachd(DATABASE_URL=url, REDIS_URL=REDIS_OWN) as base:
            c = Client(base_url=base)
            r = c.post("/api/auth/sign-in/email", json={"email": email, "password": PASSWORD})
            assert r.status_code == 200, r.text
            assert r.json()["user"]["id"] == uid
            me = c.get("/api/users/me").json()["data"]
            assert me["globalRole"] == "PlatformAdmin", me
            # The HTTP route sees the platform initialized.
            assert_error(first_run(base), 409, "CONFLICT")

        r = cli(url, "--email", unique_email("cli2"), "--name", "Second Admin")
        assert r.returncode == 1 and "already initialized" in r.stderr, r
        assert admins(url) == "1"


def test_cli_refuses_an_email_taken_by_a_normal_account():
    with temp_database() as url:
        email = unique_email("taken")
        with second_coachd(DATABASE_URL=url, REDIS_URL=REDIS_OWN) as base:
            r = Client(base_url=base).post("/api/auth/sign-up/email", json={
                "email": email, "password": PASSWORD, "name": "Normal User"})
            assert r.status_code == 200, r.text
        r = cli(url, "--email", email, "--name", "Grace Hopper")
        assert r.returncode == 1 and "exists already" in r.stderr, r
        assert admins(url) == "0"

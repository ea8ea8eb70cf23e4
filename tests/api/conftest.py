"""Fixtures for the black-box API tests. scripts/test starts PostgreSQL, Redis, the SMTP and
push sinks and coachd, then runs pytest here with the COACHD_* variables of helpers.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import helpers  # noqa: E402
from helpers import Client, MailBox, PushBox  # noqa: E402


@pytest.fixture(scope="session")
def base_url():
    return helpers.BASE_URL


@pytest.fixture(scope="session")
def client_key():
    return helpers.CLIENT_KEY


@pytest.fixture
def client():
    """A fresh anonymous client (requests.Session bound to the server)."""
    with Client() as c:
        yield c


@pytest.fixture
def new_client():
    """Factory for more anonymous clients: new_client(org_id=None, client_key=None)."""
    made = []

    def make(**kwargs):
        c = Client(**kwargs)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


@pytest.fixture
def sign_up():
    """Factory: sign_up(email=None, password=..., name=..., lang=None) -> (client, user).
    Every call uses a fresh address unless one is given; the client holds the session cookie."""
    made = []

    def make(**kwargs):
        c, user = helpers.sign_up(**kwargs)
        made.append(c)
        return c, user

    yield make
    for c in made:
        c.close()


@pytest.fixture
def user(sign_up):
    """A signed-in fresh user: (client, user)."""
    return sign_up()


@pytest.fixture(scope="session")
def mail():
    """The SMTP sink's mailbox: mail.wait_for(address) -> Mail (subject, text, html, links)."""
    return MailBox()


@pytest.fixture(scope="session")
def push():
    """The push sink: push.wait_for(token) -> the message sent to that token."""
    return PushBox()


@pytest.fixture(scope="session")
def psql():
    """psql(sql, **vars) -> rows (tuples of strings, None for NULL) of the last statement."""
    return helpers.psql


@pytest.fixture(scope="session")
def psql_value():
    return helpers.psql_value


@pytest.fixture(scope="session")
def redis_cli():
    return helpers.redis_cli


@pytest.fixture
def restart_postgres():
    """Call it to restart the server's PostgreSQL (a fault test); waits until it is back."""
    return helpers.restart_postgres


@pytest.fixture
def postgres_ctl():
    """postgres_ctl("stop") / postgres_ctl("start"): a longer outage than a restart. A test that
    stops it need not start it again: this fixture does so at the end of the test."""
    yield helpers.postgres_ctl
    helpers.postgres_ctl("start")


@pytest.fixture
def platform_admin():
    """A signed-in PlatformAdmin: (client, user)."""
    from orgs import make_platform_admin
    return make_platform_admin()


@pytest.fixture
def make_org(platform_admin):
    """Factory: make_org(roles=ORG_ROLES) -> Org with one member per role (see orgs.py)."""
    from orgs import ORG_ROLES, Org

    def make(roles=ORG_ROLES, name=None):
        return Org(platform_admin[0], name=name, roles=roles)

    return make


def pytest_collection_modifyitems(session, config, items):
    """test_openapi_mutations.py last: it mutates the answers every other test received."""
    items.sort(key=lambda item: item.module.__name__ == "test_openapi_mutations")


def pytest_terminal_summary(terminalreporter):
    """How much of docs/openapi.json the suite's responses exercised."""
    try:
        import openapi_check
    except ImportError:
        return
    ops = sum(len(v) for v in openapi_check.DOC["paths"].values())
    terminalreporter.write_line(
        "openapi: %d responses and %d requests validated, %d of %d operations seen (%d described "
        "by routes/schemas), %d undocumented statuses of undescribed operations: %s"
        % (openapi_check.CHECKED["responses"], openapi_check.CHECKED["requests"],
           len(openapi_check.CHECKED["operations"]), ops, len(openapi_check.DESCRIBED),
           len(openapi_check.UNDOCUMENTED), sorted(openapi_check.UNDOCUMENTED)[:40]))
    mutations = getattr(terminalreporter.config, "openapi_mutations", None)
    if mutations:
        terminalreporter.write_line("openapi mutations: %d recorded answers, %d mutants caught"
                                    % mutations)

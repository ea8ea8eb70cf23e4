"""Date-times a client sends: chat history and search `before`, the session list's `from` and
`to`, a session's `scheduledAt`. Each is parsed by domain/timefmt and handed to PostgreSQL as
the text the server wrote from the parsed instant, so PostgreSQL never reads the client's own
spelling: an input the parser accepts is served (200 / 201) with its exact meaning, one it
refuses is 400 VALIDATION_ERROR naming the field, and neither ends in a 500.

Accepted spellings PostgreSQL reads differently or not at all: a decimal comma, offsets past
+-15:59 (PostgreSQL's limit), fractions past microseconds. Refused: leap seconds, year 0000,
instants that an offset moves out of years 0001..9999 UTC."""
import pytest

from chat_fixtures import Chat, insert_messages
from helpers import assert_error
from ment_fixtures import make_mentorship, make_session
from orgs import new_org

# Accepted by the parser, with the fixture's messages (at 00:00:00.4 and .6 UTC of 2024-01-01)
# strictly older than each.
ACCEPTED = [
    ("2024-01-01T00:00:00,5Z", "old"),            # decimal comma (ISO 8601's preferred sign)
    ("2024-01-01T09:00:00,5+09:00", "old"),       # the same instant, comma and offset
    ("9999-12-31T23:59:59.999+23:59", "both"),    # offset beyond PostgreSQL's +-15:59
    ("2024-01-01T00:00:00.5000009Z", "old"),      # digits past microseconds: truncated
    ("2024-01-01T00:00:00.600000Z", "old"),       # a cursor's microseconds are kept
    ("2024-01-01T00:00:00.600001Z", "both"),
    ("2024-01-01T09:00:00.600001+09:00", "both"),
    ("2023-12-31T00:00:00.5-23:59", "none"),      # 2023-12-31T23:59:00.5Z, the largest offset west
]
# Refused by the parser (or out of the range PostgreSQL and the API write).
REFUSED = [
    "2016-12-31T23:59:60Z",                 # leap second
    "0000-01-01T00:00:00Z",                 # year 0000
    "0001-01-01T00:00:00+00:01",            # 0000-12-31T23:59:00Z
    "9999-12-31T23:59:59.999-00:01",        # 10000-01-01T00:00:59.999Z
    "2024-01-01T00:00:00+24:00",
    "2024-01-01T00:00:00+99:99",
    "2024-01-01T00:00:00,Z",
    "2024-01-01T00:00:00+05:30:00",
    "2024-01-01T00:00:00.5",                # no zone
]


@pytest.fixture(scope="module")
def chat():
    c = Chat()
    # Two messages 200 ms apart around the cursors above: 00:00:00.4 and 00:00:00.6 UTC.
    c.old, c.new = insert_messages(c.id, c.uid("Teacher"), ["alpha tiempo", "beta tiempo"],
                                   base_sql="'2024-01-01T00:00:00.4Z'::timestamptz",
                                   step_us=200000)
    return c


def chat_ids(chat, **query):
    r = chat.c("Coach").get(chat.msgs(), params=query)
    assert r.status_code == 200, r.text[:500]
    return [x["id"] for x in r.json()["data"]]


@pytest.mark.parametrize("search", [False, True], ids=["history", "search"])
@pytest.mark.parametrize("value,older", ACCEPTED)
def test_chat_before_accepted_spellings_mean_their_instant(chat, search, value, older):
    q = {"q": "tiempo"} if search else {}
    want = {"old": [chat.old], "both": [chat.new, chat.old], "none": []}[older]
    assert chat_ids(chat, before=value, **q) == want


@pytest.mark.parametrize("search", [False, True], ids=["history", "search"])
@pytest.mark.parametrize("value", REFUSED)
def test_chat_before_refused_is_a_validation_error(chat, search, value):
    q = {"q": "tiempo"} if search else {}
    err = assert_error(chat.c("Coach").get(chat.msgs(), params=dict(q, before=value)), 400,
                       "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == ["before"]


@pytest.fixture(scope="module")
def sessions():
    org = new_org()
    m = make_mentorship(org)
    s = make_session(org, m["id"], scheduledAt="2031-03-01T10:00:00Z")["data"]
    return org, s


@pytest.mark.parametrize("field", ["from", "to"])
def test_session_list_accepted_spellings(sessions, field):
    org, s = sessions
    # 10:00:00 itself: "from" includes it up to 10:00:00.0, "to" from 10:00:00.0 on.
    cases = {"2031-03-01T10:00:00,0Z": True, "2031-03-01T19:00:00,0+09:00": True,
             "2031-03-01T10:00:00,5Z": field == "to",
             "2031-03-01T09:59:59,9999999Z": field == "from",
             "9999-12-31T23:59:59.999+23:59": field == "to",
             "2031-02-28T10:00:00-23:59": field == "from"}
    for value, listed in cases.items():
        r = org.client("Manager").get("/api/sessions", params={field: value})
        assert r.status_code == 200, (value, r.text[:500])
        assert [x["id"] for x in r.json()["data"]] == ([s["id"]] if listed else []), value


@pytest.mark.parametrize("field", ["from", "to"])
@pytest.mark.parametrize("value", REFUSED)
def test_session_list_refused_is_a_validation_error(sessions, field, value):
    org, _ = sessions
    err = assert_error(org.client("Manager").get("/api/sessions", params={field: value}), 400,
                       "VALIDATION_ERROR")
    assert [d["field"] for d in err["details"]] == [field]


def test_scheduled_at_spellings(sessions):
    org, _ = sessions
    org.add_member("Teacher", key="Teacher2")
    m = make_mentorship(org, teacher="Teacher2")
    got = make_session(org, m["id"], scheduledAt="2032-01-01T09:00:00,5+09:00")["data"]
    assert got["scheduledAt"] == "2032-01-01T00:00:00.500Z"
    got = make_session(org, m["id"], scheduledAt="9999-12-31T23:59:59.999+23:59")["data"]
    assert got["scheduledAt"] == "9999-12-31T00:00:59.999Z"
    for value in REFUSED:
        r = org.client("Coach").post("/api/sessions", json={"mentorshipId": m["id"],
                                                            "scheduledAt": value})
        err = assert_error(r, 400, "VALIDATION_ERROR")
        assert [d["field"] for d in err["details"]] == ["scheduledAt"], value

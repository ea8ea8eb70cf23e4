"""Adversarial checks of two-factor sign-in, session management and the password rules: the
failure limits hold against parallel attempts (each attempt counts before its check, a right one
is given back), malformed input on the new routes, and every session-creating path's cap."""
import socket
import threading
import time

from helpers import (BASE_URL, PASSWORD, Client, assert_error, psql_value, sign_up, unique_email)
from test_two_factor import TF, hotp, start_sign_in, steady_step, user_with_two_factor, enable


def parallel(n, fn):
    out = [None] * n
    barrier = threading.Barrier(n)

    def run(i):
        barrier.wait()
        out[i] = fn(i)
    ts = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return out


def test_parallel_wrong_codes_do_not_exceed_the_limit():
    _, user, secret, _, step = user_with_two_factor()
    c = start_sign_in(user["email"])
    cookie = c.cookies.get("auth.two_factor")
    clients = []
    for _ in range(10):
        k = Client()
        k.cookies.set("auth.two_factor", cookie)
        clients.append(k)
    wrong = "%06d" % ((int(hotp(secret, step)) + 500000) % 1000000)
    res = parallel(10, lambda i: clients[i].post(TF + "/verify-totp", json={"code": wrong}))
    codes = sorted(r.status_code for r in res)
    assert codes.count(401) <= 5, codes


def test_session_mode_parallel_wrong_codes():
    c, user, secret, _, step = user_with_two_factor()
    wrong = "%06d" % ((int(hotp(secret, step)) + 500000) % 1000000)
    res = parallel(10, lambda i: c.post(TF + "/verify-totp", json={"code": wrong}))
    codes = sorted(r.status_code for r in res)
    assert codes.count(401) <= 5, codes


def test_parallel_wrong_passwords_do_not_exceed_the_limit():
    c, user = sign_up(email=unique_email("pwrace"))
    res = parallel(12, lambda i: c.post(TF + "/enable", json={"password": "wrong-password-%d" % i}))
    codes = sorted(r.status_code for r in res)
    assert codes.count(400) <= 5, codes


def test_parallel_wrong_passwords_change_password():
    c, user = sign_up(email=unique_email("pwrace2"))
    res = parallel(12, lambda i: c.post("/api/auth/change-password", json={
        "currentPassword": "wrong-password-%d" % i, "newPassword": "Zq8#mXv2!pLw9"}))
    codes = sorted(r.status_code for r in res)
    assert codes.count(400) <= 5, codes


def test_right_attempts_are_given_back():
    """Counting before the check must not make right passwords and codes use up the budget."""
    c, user = sign_up(email=unique_email("pwok"))
    for _ in range(4):
        assert_error(c.post(TF + "/enable", json={"password": "wrong-password"}), 400,
                     "VALIDATION_ERROR")
    for _ in range(3):
        enable(c)
    secret, _ = enable(c)
    step = steady_step()
    for _ in range(4):
        assert_error(c.post(TF + "/verify-totp", json={"code": "%06d" % ((int(hotp(secret, step)) + 1) % 1000000)}),
                     401, "INVALID_CODE")
    assert c.post_json(TF + "/verify-totp", {"code": hotp(secret, step)}) == {"status": True}
    # The 5th wrong one is still allowed, the 6th attempt is not.
    assert_error(c.post(TF + "/enable", json={"password": "wrong-password"}), 400,
                 "VALIDATION_ERROR")
    assert_error(c.post(TF + "/get-totp-uri", json={"password": PASSWORD}), 429, "RATE_LIMITED")


def raw_post_and_leave(path, body, cookies="", linger=0.0):
    """Sends a POST and closes the connection without reading the answer."""
    host, port = BASE_URL.split("//")[1].split(":")
    s = socket.create_connection((host, int(port)))
    data = body.encode() if isinstance(body, str) else body
    head = ("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n%s\r\n" % (path, len(data),
                                              ("Cookie: %s\r\n" % cookies) if cookies else ""))
    s.sendall(head.encode() + data)
    if linger:
        time.sleep(linger)
    s.close()


def test_malformed_input_on_the_new_routes():
    c, user, secret, codes, step = user_with_two_factor()
    ch = start_sign_in(user["email"])
    weird = ["", " ", "\u0000123456", "１２３４５６", "😀" * 64, "😀" * 65, "é" * 200, "a" * 5000,
             "12345６", "-1", "1e5", "\ud800", codes[0].upper(), " " + codes[0] + " "]
    for path in ("/verify-totp", "/verify-backup-code"):
        for w in weird:
            r = ch.post(TF + path, json={"code": w}, openapi_loose=True)
            assert r.status_code in (400, 401, 429), (w, r.status_code, r.text)
        for body in ('{"code":', '[]', '"x"', '{"code": 123456}', '{"code": null}',
                     '{"code": ["1"]}', '{"code":"123456","trustDevice":"yes"}'):
            r = ch.post(TF + path, data=body, headers={"Content-Type": "application/json"},
                        openapi_loose=True)
            assert r.status_code in (400, 401, 429), (body, r.status_code, r.text)
    # Oversized and odd cookies.
    for cookie in ("A" * 8000, "é" * 50, "%00" * 20, "A" * 42 + "\u00e9"):
        k = Client()
        try:
            r = k.post(TF + "/verify-totp", json={"code": "123456"},
                       headers={"Cookie": "auth.two_factor=%s; auth.trust_device=%s" % (cookie, cookie)})
            assert r.status_code in (400, 401, 431), r.text
        except Exception:
            pass
    c.post(TF + "/enable", json={"password": "😀" * 2000}, openapi_loose=True)
    for tok in ("", "x" * 5000, "00000000-0000-0000-0000-00000000000G", "😀" * 30,
                "00000000-0000-0000-0000-000000000000".upper()):
        r = c.post("/api/auth/revoke-session", json={"token": tok}, openapi_loose=True)
        assert r.status_code in (400, 404), (tok, r.status_code, r.text)
    assert c.get("/api/auth/list-sessions").status_code == 200


def test_passwords_of_multibyte_characters():
    for pw, ok in (("😀" * 128, True), ("😀" * 129, False), ("Ä" * 128, True),
                   ("PASSWORD", False), ("PaSsWoRd", False), ("passwordé", True)):
        r = Client().post("/api/auth/sign-up/email", json={
            "email": unique_email("mb"), "password": pw, "name": "Zed Quux"}, openapi_loose=True)
        assert (r.status_code == 200) == ok, (pw, r.status_code, r.text)


def test_clients_leaving_mid_request():
    c, user, secret, codes, step = user_with_two_factor()
    tok = "auth.session_token=" + c.session_token
    for _ in range(3):
        raw_post_and_leave(TF + "/enable", '{"password":"%s"}' % PASSWORD, tok)
        raw_post_and_leave(TF + "/disable", '{"password":"wrong-one-xx"}', tok)
        raw_post_and_leave(TF + "/verify-totp", '{"code":"000000"}', tok)
        raw_post_and_leave("/api/auth/change-password",
                           '{"currentPassword":"nope-nope","newPassword":"Zq8#mXv2!pLw9"}', tok)
        raw_post_and_leave("/api/auth/revoke-other-sessions", '{}', tok)
    ch = start_sign_in(user["email"])
    ck = "auth.two_factor=" + ch.cookies.get("auth.two_factor")
    for _ in range(3):
        raw_post_and_leave(TF + "/verify-totp", '{"code":"000001"}', ck)
        raw_post_and_leave(TF + "/verify-backup-code", '{"code":"aaaaa-bbbbb"}', ck)
        raw_post_and_leave("/api/auth/sign-in/email",
                           '{"email":"%s","password":"%s"}' % (user["email"], PASSWORD))
    time.sleep(1.5)
    assert c.get("/api/auth/list-sessions").status_code == 200

"""What scripts/run logs before serving (scripts/lib/delivery.sh): where mail, push and the email
links go, whether video is configured, where the reference is; never a credential of a URL."""
import os
import subprocess

from helpers import ROOT


def delivery_log(**env):
    full = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    full.update({k: v for k, v in env.items() if v is not None})
    r = subprocess.run(["bash", "-c", '. scripts/lib/common.sh; . scripts/lib/delivery.sh; '
                        'delivery_log'], cwd=ROOT, env=full, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


def test_development_defaults_name_the_folders_the_pages_and_video():
    out = delivery_log(PORT="8080")
    assert "mail: .eml files under .local/mail (SMTP_URL unset)" in out
    assert "push: .json files under .local/push (PUSH_URL unset)" in out
    assert "http://localhost:8080/email-verification, /reset-password, /invite" in out
    assert "set VIDEO_APP_ID and VIDEO_APP_CERTIFICATE" in out
    assert "API reference: http://localhost:8080/api/docs" in out


def test_services_are_named_without_their_credentials():
    secret = "se/cr?et#x"
    out = delivery_log(SMTP_URL="smtp://user:%s@mail.example.com:2525/x" % secret,
                       PUSH_URL="https://tok:%s@push.example.com/--/send" % secret,
                       FRONTEND_URL="https://app.example.com", VIDEO_APP_ID="a",
                       VIDEO_APP_CERTIFICATE="b", APP_ENV="production")
    assert "mail: SMTP_URL (smtp://mail.example.com:2525)" in out, out
    assert "push: PUSH_URL (https://push.example.com)" in out, out
    assert "email links: FRONTEND_URL (https://app.example.com)" in out, out
    assert "video" not in out, out
    for part in ("user", "tok", "se", "cr", "et"):
        assert part not in out.replace("https", "").replace("reference", ""), (part, out)

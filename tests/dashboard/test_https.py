"""HTTPS answers: Secure cookies and HSTS (``server/secure_cookies.py``,
settings' ``QUEENADMIN_HTTPS`` and ``DJANGO_SECURE_HSTS_*``).

In process, ``secure=True`` stands for a request that arrived over HTTPS;
``test_behind_proxy.py`` runs the real thing through ``serve``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User

from tests.conftest import ROOT

pytestmark = pytest.mark.django_db


def test_an_https_answer_marks_every_cookie_secure(client, settings):
    settings.SECURE_HSTS_SECONDS = 600
    User.objects.create_user("otto", password="pw", is_staff=True)
    page = client.get("/login/", secure=True)
    assert page.cookies["csrftoken"]["secure"] is True
    assert page["Strict-Transport-Security"] == "max-age=600"
    logged_in = client.post(
        "/login/", {"username": "otto", "password": "pw"}, secure=True, HTTP_REFERER="https://testserver/login/"
    )
    assert logged_in.status_code == 302
    assert logged_in.cookies["sessionid"]["secure"] is True


def test_a_plain_http_answer_does_not(client, settings):
    settings.SECURE_HSTS_SECONDS = 600
    page = client.get("/login/")
    assert page.cookies["csrftoken"]["secure"] == ""
    assert "Strict-Transport-Security" not in page


def _settings_with(env: dict[str, str]) -> dict[str, object]:
    code = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "print(json.dumps([s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS, "
        "s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SECURE_HSTS_PRELOAD]))"
    )
    names = (
        "QUEENADMIN_HTTPS",
        "DJANGO_SECURE_HSTS_SECONDS",
        "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "DJANGO_SECURE_HSTS_PRELOAD",
    )
    base = {k: v for k, v in os.environ.items() if k not in names}
    base["DJANGO_SETTINGS_MODULE"] = "queenadmin.settings"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**base, **env}, check=True, capture_output=True, text=True
    )
    secure_session, secure_csrf, hsts, subdomains, preload = json.loads(out.stdout.strip().splitlines()[-1])
    return {"cookies": [secure_session, secure_csrf], "hsts": hsts, "subdomains": subdomains, "preload": preload}


def test_the_environment_sets_cookies_and_hsts():
    """Unset: cookies Secure only on HTTPS answers, no HSTS. QUEENADMIN_HTTPS=1:
    Secure on every answer, HSTS a year. DJANGO_SECURE_HSTS_* override."""
    assert _settings_with({}) == {"cookies": [False, False], "hsts": 0, "subdomains": False, "preload": False}
    https = _settings_with({"QUEENADMIN_HTTPS": "1"})
    assert (https["cookies"], https["hsts"]) == ([True, True], 31536000)
    tuned = _settings_with(
        {
            "QUEENADMIN_HTTPS": "1",
            "DJANGO_SECURE_HSTS_SECONDS": "300",
            "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "1",
            "DJANGO_SECURE_HSTS_PRELOAD": "1",
        }
    )
    assert (tuned["hsts"], tuned["subdomains"], tuned["preload"]) == (300, True, True)
    assert _settings_with({"DJANGO_SECURE_HSTS_SECONDS": "86400"})["hsts"] == 86400

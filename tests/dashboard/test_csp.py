"""The Content-Security-Policy header: on every dashboard, admin, login and
error page, never on the API, and only reported with
``QUEENADMIN_CSP_REPORT_ONLY=1``. (Whether the pages keep to it is what
``tests/browser`` checks: no violation on any page.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib import admin
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from queenadmin.domain import kv, locks, queues
from queenadmin.plumbing.db import json_text
from queenadmin.server.csp import csp_settings
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db

HEADER = "Content-Security-Policy"
REPORT_ONLY = "Content-Security-Policy-Report-Only"

#: The policy, directive by directive (django-csp writes them in no fixed order).
POLICY = {
    "default-src": "'self'",
    "script-src": "'self'",
    "style-src": "'self'",
    "img-src": "'self'",
    "connect-src": "'self'",
    "object-src": "'none'",
    "base-uri": "'none'",
    "form-action": "'self'",
    "frame-ancestors": "'none'",
}

DASHBOARD = [
    "/",
    "/queues/",
    "/queues/orders/",
    "/locks/",
    "/locks/?name=jobs.nightly",
    "/timers/",
    "/kv/",
    "/kv/config/",
    "/kv/config/key/feature.x",
    "/audit/",
    "/search/?q=feature",
    "/account/two-factor/",
]


def _directives(value: str) -> dict[str, str]:
    return dict(part.strip().split(None, 1) for part in value.split(";") if part.strip())


def _assert_policy(response) -> None:
    assert HEADER in response, f"{response.status_code} without {HEADER}"
    assert _directives(response[HEADER]) == POLICY
    assert REPORT_ONLY not in response


@pytest.fixture
def data(db):
    kv.kv_put(namespace="config", key="feature.x", value={"on": True}, ttl=None)
    locks.lock_acquire(name="jobs.nightly", ttl=60, owner="worker-1")
    queues.queue_push(items=[queues.PushItem("orders", queues.DEFAULT_PARTITION, json_text({"n": 1}), None)])


@pytest.fixture
def operator_client(operator) -> Client:
    client = Client()
    client.force_login(operator)
    return client


@pytest.mark.parametrize("path", DASHBOARD)
def test_every_dashboard_page_has_the_policy(operator_client, data, path):
    response = operator_client.get(path)
    assert response.status_code == 200, path
    _assert_policy(response)


def test_an_htmx_partial_has_the_policy_too(operator_client, data):
    response = operator_client.get("/locks/", headers={"HX-Request": "true"})
    assert response.status_code == 200
    _assert_policy(response)


def test_the_login_pages_have_the_policy(client, operator):
    _assert_policy(client.get("/login/"))
    _assert_policy(client.get("/admin/login/"))
    # A wrong password answers the form again; too many answer the lockout page.
    for _ in range(5):
        _assert_policy(client.post("/login/", {"username": "otto", "password": "wrong"}))
    locked = client.post("/login/", {"username": "otto", "password": "wrong"})
    assert locked.status_code == 429
    _assert_policy(locked)


def test_every_admin_page_has_the_policy(client, db):
    boss = User.objects.create_superuser("boss", password="pw")
    client.force_login(boss)
    paths = ["/admin/"]
    for model in admin.site._registry:
        opts = model._meta
        paths.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
        paths.append(reverse(f"admin:{opts.app_label}_{opts.model_name}_add"))
    for path in paths:
        response = client.get(path)
        # Models the admin shows but does not let anyone add answer 403.
        assert response.status_code in (200, 403), path
        _assert_policy(response)


def test_the_error_pages_have_the_policy(client, outsider, viewer, monkeypatch):
    client.force_login(viewer)
    missing = client.get("/queues/nosuchqueue/")
    assert missing.status_code == 404
    _assert_policy(missing)
    unknown = client.get("/no/such/page/")
    assert unknown.status_code == 404
    _assert_policy(unknown)

    refused = Client()
    refused.force_login(outsider)
    forbidden = refused.get("/")
    assert forbidden.status_code == 403
    _assert_policy(forbidden)

    from queenadmin.dashboard.views import search

    def broken(**kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(search, "search", broken)
    crashing = Client(raise_request_exception=False)
    crashing.force_login(viewer)
    crash = crashing.get("/search/", {"q": "x"})
    assert crash.status_code == 500
    _assert_policy(crash)


@pytest.mark.parametrize("path", ["/api/v1/kv", "/api/v1/docs", "/api/v1/no/such/route", "/api", "/health"])
def test_the_api_has_no_policy(client, path):
    response = client.get(path)
    assert HEADER not in response
    assert REPORT_ONLY not in response


def test_report_only_sends_the_policy_under_the_other_header(operator_client, settings):
    for name, value in csp_settings(report_only=True).items():
        setattr(settings, name, value)
    response = operator_client.get("/locks/")
    assert HEADER not in response
    assert _directives(response[REPORT_ONLY]) == POLICY
    assert REPORT_ONLY not in operator_client.get("/api/v1/kv")


@pytest.mark.parametrize(("env", "enforced"), [("1", False), ("", True), ("0", True)])
def test_the_report_only_setting_comes_from_the_environment(env, enforced):
    code = (
        "from django.conf import settings as s; "
        "print(bool(s.CONTENT_SECURITY_POLICY), bool(s.CONTENT_SECURITY_POLICY_REPORT_ONLY))"
    )
    environ = {**os.environ, "DJANGO_SETTINGS_MODULE": "queenadmin.settings", "QUEENADMIN_CSP_REPORT_ONLY": env}
    out = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out == [str(enforced), str(not enforced)]

"""Who holds a lock: each lease records the identity of the caller that took
it (our API token's name, a JWT's ``sub``, an in-process caller's word),
and the dashboard names it beside the owner's fingerprint, never showing
the owner string itself."""

from __future__ import annotations

import json
import time
from typing import Any

import jwt as pyjwt
import pytest
from django.http import QueryDict
from django.test import Client, override_settings

from queenadmin.dashboard import live
from queenadmin.dashboard.views.locks import LOCKS
from queenadmin.domain import kv, locks, tokens
from queenadmin.domain.audit import Who
from queenadmin.domain.locks.operator import lease_mark, lock_force_release, locks_page
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db

SECRET = "lock-caller-tests-secret-of-at-least-thirty-two-bytes"
HS = {"QUEENADMIN_JWT_ENABLED": True, "QUEENADMIN_JWT_SECRET": SECRET}


def jwt_for(sub: str, role: str = "read-write") -> str:
    now = int(time.time())
    return pyjwt.encode({"sub": sub, "role": role, "iat": now, "exp": now + 600}, SECRET, algorithm="HS256")


def lock_call(bearer: str, *operations: dict[str, Any]) -> list[dict[str, Any]]:
    client = Client(HTTP_AUTHORIZATION=f"Bearer {bearer}")
    body = json.dumps({"operations": list(operations)})
    answer = client.post("/api/v1/locks", data=body, content_type="application/json")
    assert answer.status_code == 200, answer.content
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


def every_view_of_the_locks(client: Client, operator: Any, name: str) -> str:
    """The locks page, the lock's own view (``?name=``), its htmx partial, what
    the socket pushes, and the KV pages of the permits, as one text."""
    shown = [
        client.get("/locks/").content.decode(),
        client.get(f"/locks/?name={name}").content.decode(),
        client.get(f"/locks/?name={name}", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="locks-holders").content.decode(),
        live.render_regions(LOCKS, operator, QueryDict(f"name={name}"), {"locks-holders"})[0],
        client.get(f"/kv/{kv.LOCKS_NAMESPACE}/").content.decode(),
    ]
    return "\n".join(shown)


def test_the_locks_page_names_the_token_that_took_a_lock_and_hides_its_owner(client_for, operator, pages):
    owner = "owner-secret-7f3a9c:host-12:pid-4711"
    token = tokens.token_create(by=tokens.HOST, name="nightly-billing-runner")
    (granted,) = lock_call(token, {"op": "acquire", "name": "nightly-billing", "ttlSeconds": 60, "owner": owner})
    assert granted["acquired"] is True
    # A renew keeps who took the lease.
    (renewed,) = lock_call(
        token, {"op": "renew", "name": "nightly-billing", "ttlSeconds": 60, "token": granted["token"], "owner": owner}
    )
    assert renewed["renewed"] is True
    client = client_for(operator)
    html = every_view_of_the_locks(client, operator, "nightly-billing")
    assert html.count("nightly-billing-runner") >= 5
    assert "data-caller>nightly-billing-runner<" in html
    assert owner not in html
    pages.assert_free_of(owner)
    (holder,) = locks.info("nightly-billing").holders
    assert (holder.caller, holder.masked) == ("nightly-billing-runner", True)
    assert owner not in repr(holder)


@override_settings(**HS)
def test_a_jwt_lease_names_its_sub_on_the_page_and_in_a_force_release(client_for, operator, pages):
    owner = "jwt-held-owner-secret-55d1"
    bearer = jwt_for("alice@example.com")
    (granted,) = lock_call(bearer, {"op": "acquire", "name": "reports", "ttlSeconds": 60, "owner": owner, "limit": 2})
    assert granted["acquired"] is True
    client = client_for(operator)
    html = every_view_of_the_locks(client, operator, "reports")
    assert "data-caller>alice@example.com<" in html
    assert "jwt:alice" not in html
    (permit,) = locks_page(prefix="reports").permits
    assert permit.caller == "alice@example.com"
    released = lock_force_release(
        name="reports", slot=permit.slot, lease=lease_mark(owner=owner, since=permit.since), who=Who("olga")
    )
    assert released.released
    entry = AuditEntry.objects.get(action="lock.release")
    assert "taken by alice@example.com" in entry.before
    assert owner not in entry.before
    client.get("/audit/")
    pages.assert_free_of(owner, bearer)


def test_an_in_process_caller_names_itself_or_nobody(client_for, operator):
    handle = locks.lock("cache-refresh", ttl=30, caller="cron: refresh caches")
    assert handle.acquire()
    locks.lock_acquire(name="anonymous-job", ttl=30, owner="w-1")
    html = client_for(operator).get("/locks/").content.decode()
    assert "data-caller>cron: refresh caches<" in html
    assert "not named" in html
    assert locks.info("anonymous-job").holders[0].caller is None
    assert handle.info().holders[0].caller == "cron: refresh caches"
    assert handle.release()


def test_a_caller_is_cut_and_made_printable_never_refused():
    """An identity is a label: NUL (which PostgreSQL refuses in text), a
    control or a bidi mark is replaced, and a long one cut to 256."""
    assert locks.check_caller(None) is None
    assert locks.check_caller("svc\x00a\nb\u202e") == "svc\ufffda\ufffdb\ufffd"
    assert locks.check_caller("x" * 1000) == "x" * locks.MAX_CALLER_CHARS
    got = locks.lock_acquire(name="odd-caller", ttl=30, caller="bad\x00sub")
    assert got.acquired
    assert locks.lock_holders(name="odd-caller").holders[0].caller == "bad\ufffdsub"

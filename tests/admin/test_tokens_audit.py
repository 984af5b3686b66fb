"""API tokens (create shown once, revoke, audit) and audit entries (read-only)."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from queenadmin.domain import tokens
from queenadmin.domain.audit import Who
from queenadmin.domain.clock import now
from queenadmin.models import ApiToken, AuditEntry, TokenScope
from tests.admin.conftest import action, groups_of

pytestmark = pytest.mark.django_db

TOKENS = "/admin/queenadmin/apitoken/"
AUDIT = "/admin/queenadmin/auditentry/"


def _api(token: str) -> int:
    return Client(HTTP_AUTHORIZATION=f"Bearer {token}").get("/api/v1/resources/queues").status_code


def test_create_shows_the_token_once(operator, published, committing):
    with committing():
        response = operator.post(
            f"{TOKENS}add/",
            {"name": "billing-svc", "grants": "queue:billing.*=write", "reason": "new service", "_save": "Save"},
        )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    found = re.search(r'<code id="new-token">([^<]+)</code>', response.content.decode())
    assert found is not None
    secret = found.group(1)
    auth = tokens.token_check(secret)
    assert (auth.name, auth.scope, str(auth.grants)) == ("billing-svc", TokenScope.WRITE, "queue:billing.*=write")
    assert _api(secret) == 200
    entry = AuditEntry.objects.get(action="token.create")
    assert (entry.via, entry.reason, entry.actor, entry.target) == ("admin", "new service", "otto", "billing-svc")
    assert secret not in entry.after
    assert "audit" in groups_of(published)
    # Never again: not in the list, the token's page, or the audit list.
    row = ApiToken.objects.get(name="billing-svc")
    for url in (TOKENS, f"{TOKENS}{row.pk}/change/", AUDIT, f"{AUDIT}{entry.pk}/change/"):
        assert secret not in operator.get(url).content.decode()


def test_create_a_taken_name_is_refused(operator):
    tokens.token_create(by=tokens.HOST, name="svc")
    form = {"name": "svc", "grants": "queue:svc=write", "reason": "x", "_save": "Save"}
    response = operator.post(f"{TOKENS}add/", form, follow=True)
    assert "exists already" in response.content.decode()
    assert ApiToken.objects.count() == 1
    assert not AuditEntry.objects.exists()


def test_revoke_with_a_reason(operator, published, committing):
    secret = tokens.token_create(by=tokens.HOST, name="old")
    tokens.token_create(by=tokens.HOST, name="keep")
    old = ApiToken.objects.get(name="old")
    page = operator.post(TOKENS, {"action": "revoke", "_selected_action": [old.pk]})
    assert "Reason" in page.content.decode()
    with committing():
        done = operator.post(TOKENS, action("revoke", [old.pk], reason="leaked"), follow=True)
    assert "Revoked 1 row." in done.content.decode()
    assert _api(secret) == 401
    entry = AuditEntry.objects.get(action="token.revoke")
    assert (entry.via, entry.reason, entry.target) == ("admin", "leaked", "old")
    assert ApiToken.objects.get(name="keep").revoked_at is None
    assert "audit" in groups_of(published)
    again = operator.post(TOKENS, action("revoke", [old.pk], reason="again"), follow=True)
    assert "Revoked 0 rows. Unchanged: 1 revoked already." in again.content.decode()


def test_create_with_a_scope_and_see_it_listed(operator, committing):
    """The add form sets the scope; the created page, the list and the audit entry show it."""
    page = operator.get(f"{TOKENS}add/").content.decode()
    assert '<option value="write" selected>' in page
    with committing():
        response = operator.post(
            f"{TOKENS}add/",
            {"name": "reports", "scope": "read", "grants": "queue:reports.*=read", "reason": "r", "_save": "Save"},
        )
    body = response.content.decode()
    assert "(scope <strong>read</strong>)" in body
    found = re.search(r'<code id="new-token">([^<]+)</code>', body)
    assert found is not None
    secret = found.group(1)
    assert tokens.token_check(secret).scope == TokenScope.READ
    assert _api(secret) == 200
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").delete("/api/v1/resources/queues/x").status_code == 403
    assert "scope read" in AuditEntry.objects.get(action="token.create").after
    tokens.token_create(by=tokens.HOST, name="deleter-svc", scope="admin")
    listing = operator.get(TOKENS).content.decode()
    assert '<td class="field-scope">Read</td>' in listing
    assert '<td class="field-scope">Admin</td>' in listing
    only_admin = operator.get(TOKENS, {"scope__exact": "admin"}).content.decode()
    assert "deleter-svc" in only_admin
    assert "reports" not in only_admin
    refused = operator.post(f"{TOKENS}add/", {"name": "x", "scope": "root", "reason": "r", "_save": "Save"})
    assert "Select a valid choice" in refused.content.decode()
    assert not ApiToken.objects.filter(name="x").exists()


def test_token_list_search_and_filter(operator):
    tokens.token_create(by=tokens.HOST, name="alpha")
    tokens.token_create(by=tokens.HOST, name="beta")
    tokens.token_revoke(name="beta")
    assert "alpha" in operator.get(TOKENS, {"q": "alp"}).content.decode()
    assert "beta" not in operator.get(TOKENS, {"q": "alp"}).content.decode()
    active = operator.get(TOKENS, {"revoked_at__isempty": "1"}).content.decode()
    assert "alpha" in active
    assert ">beta<" not in active


def test_the_hash_never_shows(operator):
    tokens.token_create(by=tokens.HOST, name="svc")
    row = ApiToken.objects.get(name="svc")
    for url in (TOKENS, f"{TOKENS}{row.pk}/change/"):
        assert row.token_hash not in operator.get(url).content.decode()


def test_viewer_may_not_create_or_revoke(viewer):
    """Viewers hold no token permission at all."""
    secret = tokens.token_create(by=tokens.HOST, name="svc")
    row = ApiToken.objects.get(name="svc")
    assert viewer.get(TOKENS).status_code == 403
    assert viewer.post(f"{TOKENS}add/", {"name": "x", "reason": "x"}).status_code == 403
    assert viewer.post(TOKENS, action("revoke", [row.pk], reason="x")).status_code == 403
    assert _api(secret) == 200


@pytest.fixture
def entries() -> None:
    from django.db import transaction

    with transaction.atomic():
        Who("otto", "r1", "admin").record_in_txn(now=now(), action="kv.edit", target="a/b")
        Who("vera", "r2").record_in_txn(now=now(), action="timer.cancel", target="q/t")


def test_audit_is_read_only_and_filterable(operator, entries):
    page = operator.get(AUDIT).content.decode()
    assert "a/b" in page
    assert "q/t" in page
    assert "q/t" not in operator.get(AUDIT, {"via__exact": "admin"}).content.decode()
    assert "a/b" not in operator.get(AUDIT, {"kind__exact": "timer"}).content.decode()
    assert "a/b" not in operator.get(AUDIT, {"q": "vera"}).content.decode()
    entry = AuditEntry.objects.get(target="a/b")
    assert operator.post(f"{AUDIT}{entry.pk}/change/", {"reason": "x"}).status_code == 403
    assert operator.post(f"{AUDIT}{entry.pk}/delete/", {"post": "yes"}).status_code == 403
    deleting = operator.post(AUDIT, {"action": "delete_selected", "_selected_action": [entry.pk], "post": "yes"})
    assert deleting.status_code in (200, 302)
    assert AuditEntry.objects.count() == 2


def test_create_with_grants_and_see_them_listed(operator, committing):
    """The add form takes grants (one a line); the created page and the list show them."""
    with committing():
        response = operator.post(
            f"{TOKENS}add/",
            {
                "name": "orders",
                "scope": "write",
                "grants": "queue:orders.*=write\r\nkv:orders=read",
                "reason": "r",
                "_save": "Save",
            },
        )
    body = response.content.decode()
    assert "queue:orders.*=write<br>kv:orders=read" in body
    secret = re.search(r'<code id="new-token">([^<]+)</code>', body).group(1)
    auth = tokens.token_check(secret)
    assert [str(g) for g in auth.grants.grants] == ["queue:orders.*=write", "kv:orders=read"]
    assert Client(HTTP_AUTHORIZATION=f"Bearer {secret}").delete("/api/v1/resources/queues/orders.eu").status_code == 403
    tokens.token_create(by=tokens.HOST, name="all")
    listing = operator.get(TOKENS).content.decode()
    assert '<td class="field-grants_shown">queue:orders.*=write, kv:orders=read</td>' in listing
    assert '<td class="field-grants_shown">whole store</td>' in listing
    refused = operator.post(
        f"{TOKENS}add/", {"name": "x", "scope": "read", "grants": "queue:x=write", "reason": "r", "_save": "Save"}
    )
    assert "gives more than the token&#x27;s scope, read" in refused.content.decode()
    assert not ApiToken.objects.filter(name="x").exists()


def test_an_active_tokens_page_edits_its_grants_with_an_audit_entry(operator, committing):
    tokens.token_create(by=tokens.HOST, name="svc")
    row = ApiToken.objects.get(name="svc")
    page = f"{TOKENS}{row.pk}/change/"
    assert 'name="grants"' in operator.get(page).content.decode()
    bad = operator.post(page, {"grants": "queue:a*b=read", "reason": "r", "_save": "Save"})
    assert "one * at the end" in bad.content.decode()
    assert ApiToken.objects.get(name="svc").grants == ""
    with committing():
        done = operator.post(page, {"grants": "kv:orders=write", "reason": "least privilege", "_save": "Save"})
    assert done.status_code == 302
    assert ApiToken.objects.get(name="svc").grants == "kv:orders=write"
    entry = AuditEntry.objects.get(action="token.grants")
    assert (entry.via, entry.reason, entry.target) == ("admin", "least privilege", "svc")
    assert (entry.before, entry.after) == ("no grants (the whole store)", "grants kv:orders=write")
    # A revoked token's page is a view.
    tokens.token_revoke(name="svc")
    revoked = operator.get(page).content.decode()
    assert 'name="grants"' not in revoked
    assert "kv:orders=write" in revoked

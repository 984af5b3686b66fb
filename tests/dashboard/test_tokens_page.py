"""``/tokens/``: every API token with its scope and grants, for operators."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.domain import tokens


@pytest.fixture
def made(db: None) -> dict[str, str]:
    """Two active tokens, one limited by grants, and a revoked one; their secrets."""
    secrets = {
        "billing-svc": tokens.token_create(by=tokens.HOST, name="billing-svc", scope="write"),
        "orders-svc": tokens.token_create(
            by=tokens.HOST,
            name="orders-svc",
            scope="write",
            grants=["queue:orders.*=write", "kv:orders=write", "*=read"],
        ),
        "old-svc": tokens.token_create(by=tokens.HOST, name="old-svc", scope="read"),
    }
    tokens.token_revoke(name="old-svc")
    return secrets


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _row(html: str, name: str) -> str:
    found = re.search(rf'<tr data-token="{re.escape(name)}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {name}"
    return found.group(1)


def test_an_operator_sees_each_tokens_scope_and_grants_never_a_secret(operator, made):
    answer = _client(operator).get("/tokens/")
    assert answer.status_code == 200
    html = answer.content.decode()
    orders = _row(html, "orders-svc")
    for grant in ("queue:orders.*=write", "kv:orders=write", "*=read"):
        assert f'<li class="mono">{grant}</li>' in orders, orders
    assert "whole store" not in orders
    assert "whole store" in _row(html, "billing-svc")
    assert "Edit in admin" in orders
    # The revoked one is listed under its own heading, with no edit link.
    assert html.index("Revoked") < html.index('data-token="old-svc"')
    assert "Edit in admin" not in _row(html, "old-svc")
    for secret in made.values():
        assert secret not in html
        assert secret[:12] not in html
    assert 'href="/tokens/" aria-current="page"' in html


def test_a_viewer_gets_403_and_no_link(viewer, made):
    client = _client(viewer)
    assert client.get("/tokens/").status_code == 403
    assert 'href="/tokens/"' not in client.get("/locks/").content.decode()


def test_anonymous_goes_to_the_login_page(db):
    answer = Client().get("/tokens/")
    assert answer.status_code == 302
    assert answer["Location"].startswith("/login/?next=/tokens/")


def test_only_get(operator, made):
    assert _client(operator).post("/tokens/").status_code == 405


def test_each_token_names_the_account_that_made_it(operator, made):
    """A token made by an account names it; one made on the host's shell
    names none; once the account is deleted its token is listed as revoked,
    with the name it had."""
    mate = User.objects.create_user("mara", password="pw", is_staff=True)
    tokens.token_create(by=tokens.maker_of(operator), name="otto-svc", grants=["queue:otto.*=write"])
    tokens.token_create(by=tokens.maker_of(mate), name="mara-svc", grants=["queue:mara.*=write"])
    mate.delete()
    html = _client(operator).get("/tokens/").content.decode()
    assert '<td class="made-by">otto</td>' in _row(html, "otto-svc")
    assert '<td class="made-by">mara (account deleted)</td>' in _row(html, "mara-svc")
    assert html.index("Revoked") < html.index('data-token="mara-svc"')
    assert "no account" in _row(html, "billing-svc")

"""API tokens: hashed at rest, checked in constant time, revocable."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from queenadmin.domain import tokens
from queenadmin.errors import InvalidArgument, NotFound
from queenadmin.models import ApiToken, TokenScope

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_only_as_its_hash():
    token = tokens.token_create(name="svc")
    row = ApiToken.objects.get(name="svc")
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (row.token_hash, row.prefix)
    assert tokens.token_check(token) == tokens.TokenAuth("svc", TokenScope.WRITE)
    assert tokens.token_check(token + "x") is None
    assert tokens.token_check("") is None


def test_names_are_unique_and_revoke_needs_an_active_token():
    tokens.token_create(name="svc")
    with pytest.raises(tokens.TokenExists):
        tokens.token_create(name="svc")
    with pytest.raises(NotFound):
        tokens.token_revoke(name="nobody")
    tokens.token_revoke(name="svc")
    with pytest.raises(NotFound):
        tokens.token_revoke(name="svc")


def test_revoking_in_this_process_takes_effect_at_once():
    token = tokens.token_create(name="svc")
    assert tokens.token_check(token) == tokens.TokenAuth("svc", TokenScope.WRITE)  # now cached
    tokens.token_revoke(name="svc")
    assert tokens.token_check(token) is None


def test_the_admin_revokes_through_the_domain():
    token = tokens.token_create(name="svc")
    root = User.objects.create_superuser("root", "", "pw")
    client = Client()
    # force_login: a login needs its request (axes counts failures per address).
    client.force_login(root)
    pk = ApiToken.objects.get(name="svc").pk
    listing = client.get("/admin/queenadmin/apitoken/")
    assert listing.status_code == 200
    assert b"svc" in listing.content
    assert token.encode() not in listing.content
    asked = client.post("/admin/queenadmin/apitoken/", {"action": "revoke", "_selected_action": [pk]})
    assert b"Reason" in asked.content
    assert ApiToken.objects.get(name="svc").revoked_at is None
    form = {"action": "revoke", "_selected_action": [pk], "confirmed": "1", "reason": "rotated"}
    response = client.post("/admin/queenadmin/apitoken/", form, follow=True)
    assert response.status_code == 200
    assert ApiToken.objects.get(name="svc").revoked_at is not None
    assert tokens.token_check(token) is None


# -- scopes --------------------------------------------------------------------


def test_scopes_are_a_hierarchy():
    """read < write < admin: each scope covers itself and the ones below."""
    read, write, admin = TokenScope.READ, TokenScope.WRITE, TokenScope.ADMIN
    assert [s for s in TokenScope if read.covers(s)] == [read]
    assert [s for s in TokenScope if write.covers(s)] == [read, write]
    assert [s for s in TokenScope if admin.covers(s)] == [read, write, admin]


def test_a_token_carries_its_scope_through_the_cache():
    """The check answers the scope, from the database and from the cache the event loop reads."""
    reader = tokens.token_create(name="reader", scope="read")
    default = tokens.token_create(name="svc")
    assert tokens.token_check_cached(reader) is None  # not checked yet: no database here
    assert tokens.token_check(reader) == tokens.TokenAuth("reader", TokenScope.READ)
    assert tokens.token_check_cached(reader) == tokens.TokenAuth("reader", TokenScope.READ)
    assert tokens.token_check(default) == tokens.TokenAuth("svc", TokenScope.WRITE)
    assert [(t.name, t.scope) for t in tokens.token_list()] == [("reader", "read"), ("svc", "write")]


def test_an_unknown_scope_is_refused_and_nothing_is_created():
    with pytest.raises(InvalidArgument, match="unknown scope 'root': a token's scope is one of read, write, admin"):
        tokens.token_create(name="svc", scope="root")
    assert not ApiToken.objects.exists()


def test_apitoken_create_takes_a_scope(capsys):
    """``apitoken create NAME --scope read`` makes a read token; ``list`` shows scopes."""
    call_command("apitoken", "create", "reporting", "--scope", "read")
    secret = capsys.readouterr().out.strip().splitlines()[-1]
    assert tokens.token_check(secret) == tokens.TokenAuth("reporting", TokenScope.READ)
    call_command("apitoken", "create", "svc")
    assert ApiToken.objects.get(name="svc").scope == TokenScope.WRITE
    capsys.readouterr()
    call_command("apitoken", "list")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[2:4] for line in lines] == [["read", "active"], ["write", "active"]]


def test_apitoken_create_refuses_a_bad_scope_clearly():
    with pytest.raises(CommandError, match="unknown scope 'everything': a token's scope is one of read, write, admin"):
        call_command("apitoken", "create", "svc", "--scope", "everything")
    assert not ApiToken.objects.exists()

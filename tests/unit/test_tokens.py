"""API tokens: hashed at rest, checked in constant time, revocable."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import User
from django.test import Client

from queenadmin.domain import tokens
from queenadmin.errors import NotFound
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
    User.objects.create_superuser("root", "", "pw")
    client = Client()
    client.login(username="root", password="pw")
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

"""API tokens: hashed at rest, checked in constant time, revocable."""

from __future__ import annotations

import hashlib

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from queenadmin.domain import tokens
from queenadmin.errors import InvalidArgument, NotFound
from queenadmin.management.commands import apitoken
from queenadmin.models import ApiToken, TokenScope

pytestmark = pytest.mark.django_db


def test_a_token_is_stored_only_as_its_hash():
    token = tokens.token_create(by=tokens.HOST, name="svc")
    row = ApiToken.objects.get(name="svc")
    assert row.token_hash == hashlib.sha256(token.encode()).hexdigest()
    assert token not in (row.token_hash, row.prefix)
    assert tokens.token_check(token) == tokens.TokenAuth("svc", TokenScope.WRITE, producer_sub="svc")
    assert tokens.token_check(token + "x") is None
    assert tokens.token_check("") is None


def test_names_are_unique_and_revoke_needs_an_active_token():
    tokens.token_create(by=tokens.HOST, name="svc")
    with pytest.raises(tokens.TokenExists):
        tokens.token_create(by=tokens.HOST, name="svc")
    with pytest.raises(NotFound):
        tokens.token_revoke(name="nobody")
    tokens.token_revoke(name="svc")
    with pytest.raises(NotFound):
        tokens.token_revoke(name="svc")


def test_revoking_in_this_process_takes_effect_at_once():
    token = tokens.token_create(by=tokens.HOST, name="svc")
    assert tokens.token_check(token) == tokens.TokenAuth("svc", TokenScope.WRITE, producer_sub="svc")  # now cached
    tokens.token_revoke(name="svc")
    assert tokens.token_check(token) is None


def test_the_admin_revokes_through_the_domain():
    token = tokens.token_create(by=tokens.HOST, name="svc")
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
    reader = tokens.token_create(by=tokens.HOST, name="reader", scope="read")
    default = tokens.token_create(by=tokens.HOST, name="svc")
    assert tokens.token_check_cached(reader) is None  # not checked yet: no database here
    assert tokens.token_check(reader) == tokens.TokenAuth("reader", TokenScope.READ, producer_sub="reader")
    assert tokens.token_check_cached(reader) == tokens.TokenAuth("reader", TokenScope.READ, producer_sub="reader")
    assert tokens.token_check(default) == tokens.TokenAuth("svc", TokenScope.WRITE, producer_sub="svc")
    assert [(t.name, t.scope) for t in tokens.token_list()] == [("reader", "read"), ("svc", "write")]


def test_an_unknown_scope_is_refused_and_nothing_is_created():
    with pytest.raises(InvalidArgument, match="unknown scope 'root': a token's scope is one of read, write, admin"):
        tokens.token_create(by=tokens.HOST, name="svc", scope="root")
    assert not ApiToken.objects.exists()


def test_apitoken_create_takes_a_scope(capsys):
    """``apitoken create NAME --scope read`` makes a read token; ``list`` shows scopes."""
    call_command("apitoken", "create", "reporting", "--scope", "read")
    secret = capsys.readouterr().out.strip().splitlines()[-1]
    assert tokens.token_check(secret) == tokens.TokenAuth("reporting", TokenScope.READ, producer_sub="reporting")
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


# -- grants (issue 28) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("queue:orders.*=write", "queue:orders.*=write"),
        (" kv : orders = read ", "kv:orders=read"),
        ("*=read", "*=read"),
        ("*:*=admin", "*=admin"),
        ("lock:jobs*=write", "lock:jobs*=write"),
        ("timer:billing=read", "timer:billing=read"),
        ("*:orders.*=read", "*:orders.*=read"),
    ],
)
def test_a_grant_parses_to_its_canonical_text(text, shown):
    assert str(tokens.grant_parse(text)) == shown


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("orders", "write KIND:PATTERN=SCOPE"),
        ("queue:orders", "write KIND:PATTERN=SCOPE"),
        ("queue:orders=root", "unknown scope 'root'"),
        ("stream:orders=read", "the kind is one of kv, queue, lock, timer or \\*"),
        ("orders=read", "name the kind"),
        ("queue:=read", "the pattern is a name"),
        ("queue:or*ders=read", "one \\* at the end"),
        ("queue:a b=read", "no spaces"),
    ],
)
def test_a_bad_grant_is_refused_saying_why(text, error):
    with pytest.raises(InvalidArgument, match=error):
        tokens.grant_parse(text)


def test_grants_add_up_and_a_name_no_grant_covers_is_out_of_reach():
    """The highest covering grant wins; exact names and prefixes; nothing beyond."""
    grants = tokens.grants_parse(["queue:orders.*=write", "kv:orders=write", "*=read"])
    assert grants is not None
    assert grants.allows("queue", "orders.eu", TokenScope.WRITE)
    assert not grants.allows("queue", "orders.eu", TokenScope.ADMIN)
    assert not grants.allows("queue", "orders", TokenScope.WRITE)  # "orders.*" needs the dot
    assert grants.allows("queue", "billing", TokenScope.READ)
    assert not grants.allows("queue", "billing", TokenScope.WRITE)
    assert grants.allows("kv", "orders", TokenScope.WRITE)
    assert not grants.allows("kv", "orders2", TokenScope.WRITE)
    assert grants.allows_every("lock", TokenScope.READ)
    assert not grants.allows_every("queue", TokenScope.WRITE)
    only = tokens.grants_parse(["queue:orders.*=write"])
    assert only is not None
    assert not only.allows("queue", "billing", TokenScope.READ)
    assert not only.allows("kv", "orders.x", TokenScope.READ)
    with pytest.raises(tokens.NotGranted, match="no grant of this token gives read on queue 'billing'"):
        only.require("queue", "billing", TokenScope.READ)
    with pytest.raises(tokens.NotGranted, match="queue:\\*"):
        only.require_every("queue", TokenScope.READ)
    assert tokens.grants_parse(["", "  "]) is None


def test_a_prefix_is_covered_when_a_prefix_grant_covers_every_name_under_it():
    grants = tokens.grants_parse(["lock:orders.*=write", "lock:billing=read"])
    assert grants is not None
    assert grants.allows_prefix("lock", "orders.eu", TokenScope.READ)
    assert grants.allows_prefix("lock", "orders.", TokenScope.WRITE)
    assert not grants.allows_prefix("lock", "orders", TokenScope.READ)
    assert not grants.allows_prefix("lock", "billing", TokenScope.READ)  # an exact grant covers one name


def test_a_locks_permit_row_counts_as_the_lock():
    assert tokens.kv_resource("queen-locks", "orders.job#3") == ("lock", "orders.job")
    assert tokens.kv_resource("queen-locks", "a#b#0") == ("lock", "a#b")
    assert tokens.kv_resource("orders", "k#0") == ("kv", "orders")


def test_a_token_carries_its_grants_and_a_token_without_any_reaches_everything():
    limited = tokens.token_create(by=tokens.HOST, name="svc", scope="write", grants=["queue:orders.*=write", "*=read"])
    unlimited = tokens.token_create(by=tokens.HOST, name="all")
    auth = tokens.token_check(limited)
    assert auth is not None
    assert auth.grants is not None
    assert [str(g) for g in auth.grants.grants] == ["queue:orders.*=write", "*=read"]
    assert tokens.token_check(unlimited) == tokens.TokenAuth("all", TokenScope.WRITE, None, producer_sub="all")
    assert ApiToken.objects.get(name="svc").grants == "queue:orders.*=write\n*=read"


def test_a_grant_above_the_tokens_scope_or_a_bad_one_creates_nothing():
    with pytest.raises(InvalidArgument, match="gives more than the token's scope, read"):
        tokens.token_create(by=tokens.HOST, name="svc", scope="read", grants=["queue:orders=write"])
    with pytest.raises(InvalidArgument, match="the kind is one of"):
        tokens.token_create(by=tokens.HOST, name="svc", grants=["topic:orders=write"])
    assert not ApiToken.objects.exists()


def test_grants_are_replaced_audited_and_take_effect_at_once():
    token = tokens.token_create(by=tokens.HOST, name="svc")
    assert tokens.token_check(token).grants is None  # cached now
    tokens.token_grants_set(by=tokens.HOST, name="svc", grants=["kv:orders=write"])
    auth = tokens.token_check(token)
    assert auth is not None
    assert auth.grants is not None
    assert not auth.grants.allows("kv", "billing", TokenScope.READ)
    tokens.token_grants_set(by=tokens.HOST, name="svc", grants=[])
    assert tokens.token_check(token).grants is None
    with pytest.raises(NotFound):
        tokens.token_grants_set(by=tokens.HOST, name="nobody", grants=[])


def test_apitoken_create_and_grants_take_grants_and_list_shows_them(capsys):
    call_command("apitoken", "create", "svc", "--grant", "queue:orders.*=write", "--grant", "*=read")
    secret = capsys.readouterr().out.strip().splitlines()[-1]
    auth = tokens.token_check(secret)
    assert auth is not None
    assert auth.grants is not None
    call_command("apitoken", "create", "all")
    capsys.readouterr()
    call_command("apitoken", "list")
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[-1] for line in lines] == ["whole store", "queue:orders.*=write, *=read"]
    call_command("apitoken", "grants", "all", "--grant", "kv:x=read")
    assert capsys.readouterr().out.strip() == "Grants of 'all': kv:x=read."
    with pytest.raises(CommandError, match="the pattern is a name"):
        call_command("apitoken", "grants", "all", "--grant", "kv:a*b=read")
    assert ApiToken.objects.get(name="all").grants == "kv:x=read"


@pytest.mark.parametrize("action", ["create", "grants"])
def test_apitoken_create_and_grants_explain_grants_in_their_help(capsys, action):
    """Both subcommands that take ``--grant`` print how to write one, verbatim."""
    parser = apitoken.Command().create_parser("manage.py", "apitoken")
    with pytest.raises(SystemExit) as exited:
        parser.parse_args([action, "--help"])
    assert exited.value.code == 0
    shown = capsys.readouterr().out
    assert f"usage: manage.py apitoken {action} [-h] [--grant KIND:PATTERN=SCOPE]" in shown
    assert apitoken.GRANTS_HELP in shown

"""No account mints more power than it has (issue 36, finding 3).

An operator (the ``queenadmin operators`` group, not a superuser) makes and
edits tokens of at most ``write`` scope whose grants name what they reach;
admin scope and whole-store reach (no grants, or a grant on ``*``) are a
superuser's. A token made by an account names it, and goes when the account
goes.
"""

from __future__ import annotations

import re

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import Client

from queenadmin.dashboard.permissions import OPERATORS_GROUP
from queenadmin.domain import tokens
from queenadmin.models import ApiToken, AuditEntry, Queue, TokenScope
from tests.dashboard_ops.conftest import configure

pytestmark = pytest.mark.django_db

TOKENS = "/admin/queenadmin/apitoken/"


def _staff(username: str, *, superuser: bool = False) -> tuple[User, Client]:
    if superuser:
        user = User.objects.create_superuser(username, password="pw")
    else:
        user = User.objects.create_user(username, password="pw", is_staff=True)
        user.groups.add(Group.objects.get(name=OPERATORS_GROUP))
    client = Client()
    client.force_login(user)
    return user, client


@pytest.fixture
def otto() -> tuple[User, Client]:
    """An operator: the group's permissions, not a superuser."""
    return _staff("otto")


@pytest.fixture
def root() -> tuple[User, Client]:
    return _staff("root", superuser=True)


def _add(client: Client, name: str, scope: str, grants: str = "") -> str:
    form = {"name": name, "scope": scope, "grants": grants, "reason": "r", "_save": "Save"}
    return client.post(f"{TOKENS}add/", form).content.decode()


def _secret(page: str) -> str:
    found = re.search(r'<code id="new-token">([^<]+)</code>', page)
    assert found is not None, page
    return found.group(1)


def _refusal(page: str) -> str:
    """The form's error above its fields, or "" when there is none."""
    found = re.search(r'<ul class="errorlist nonfield"><li>(.*?)</li>', page, re.S)
    return found.group(1).replace("&#x27;", "'") if found else ""


def _edit(client: Client, name: str, grants: str) -> str:
    row = ApiToken.objects.get(name=name)
    form = {"grants": grants, "reason": "r", "_save": "Save"}
    return client.post(f"{TOKENS}{row.pk}/change/", form, follow=True).content.decode()


def _api(secret: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {secret}")


def test_an_operator_cannot_make_an_admin_or_whole_store_token_in_the_admin(otto):
    """Each is a form error that says why, no token is made, and the refusal
    is in the audit with the operator's name; the queue an admin token could
    have deleted is still there."""
    _, client = otto
    configure("orders")
    refused = [
        ("admin", "", "admin scope"),
        ("admin", "queue:orders=admin", "admin scope"),
        ("write", "", "whole store"),
        ("write", "*=write", "every name"),
        ("read", "*=read", "every name"),
        ("write", "queue:*=write\nkv:orders=write", "every name"),
    ]
    for scope, grants, said in refused:
        page = _add(client, "minted", scope, grants)
        assert said in _refusal(page), (scope, grants, page)
        assert 'id="new-token"' not in page
        assert not ApiToken.objects.exists()
    entries = AuditEntry.objects.filter(action="token.refuse").order_by("id")
    assert [(e.actor, e.via, e.target) for e in entries] == [("otto", "admin", "minted")] * len(refused)
    assert entries[0].before == "scope admin, no grants (the whole store)"
    assert (
        entries[0].after
        == "refused: only a superuser may make a token of admin scope; otto may make read, write-only and write tokens"
    )
    assert Queue.objects.filter(name="orders").exists()


def test_an_operator_makes_a_write_token_with_grants_that_name_its_reach(otto):
    """Up to write, with grants naming kinds and prefixes: made, and it names
    the operator who made it."""
    user, client = otto
    root = User.objects.create_superuser("root", password="pw")
    form = {"name": "orders-svc", "scope": "write", "grants": "queue:orders.*=write\nkv:orders=read"}
    # A maker named in the post is not the form's to set.
    page = client.post(f"{TOKENS}add/", {**form, "created_by": root.pk, "reason": "r", "_save": "Save"})
    secret = _secret(page.content.decode())
    auth = tokens.token_check(secret)
    assert auth is not None
    assert auth.scope == "write"
    row = ApiToken.objects.get(name="orders-svc")
    assert row.created_by == user
    listing = client.get(TOKENS).content.decode()
    assert '<td class="field-made_by">otto</td>' in listing
    assert _api(secret).delete("/api/v1/resources/queues/orders.eu").status_code == 403


def test_an_operator_makes_a_write_only_token_in_the_admin_and_edits_its_grants(otto):
    """Queen's write-only level is below write: an operator's to give, with
    grants up to write; the token pushes and is refused a read (403), and
    the tokens page and the admin list show its scope."""
    _, client = otto
    assert '<option value="write-only">Write-only</option>' in client.get(f"{TOKENS}add/").content.decode()
    secret = _secret(_add(client, "pusher", "write-only", "queue:orders.*=write"))
    assert ApiToken.objects.get(name="pusher").scope == "write-only"
    entry = AuditEntry.objects.get(action="token.create", target="pusher")
    assert entry.after.startswith("active, scope write-only, prefix ")
    # The grants field's own error: a grant above the token's ceiling.
    above = _edit(client, "pusher", "queue:orders.*=admin").replace("&#x27;", "'")
    assert "gives more than the token's scope, write" in above
    _edit(client, "pusher", "queue:orders.eu=write")
    assert ApiToken.objects.get(name="pusher").grants == "queue:orders.eu=write"
    body = '{"items": [{"queue": "orders.eu", "payload": 1}]}'
    assert _api(secret).post("/api/v1/push", body, content_type="application/json").status_code == 201
    assert _api(secret).get("/api/v1/resources/queues").status_code == 403
    assert '<td class="field-scope">Write-only</td>' in client.get(TOKENS).content.decode()
    page = client.get("/tokens/").content.decode()
    assert re.search(r'<tr data-token="pusher">.*?<td>write-only</td>', page, re.S)


def test_an_operator_cannot_widen_an_existing_token(otto):
    """Dropping a token's grants (the whole store), adding a grant on ``*``
    or above write are refused, and the grants stay as they were; narrowing
    is allowed, and a superuser's grants the operator could not give may
    stay while the operator changes the others."""
    _, client = otto
    tokens.token_create(name="svc", scope="admin", grants=["queue:orders=admin", "*=read"], by=tokens.HOST)
    before = ApiToken.objects.get(name="svc").grants
    for grants, said in [
        ("", "whole store"),
        ("queue:orders=admin\n*=read\nqueue:billing=admin", "gives admin scope"),
        ("queue:orders=admin\n*=read\nkv:*=write", "every name"),
    ]:
        page = _edit(client, "svc", grants)
        assert said in _refusal(page), (grants, page)
        assert ApiToken.objects.get(name="svc").grants == before
    assert AuditEntry.objects.filter(action="token.refuse", target="svc").count() == 3
    assert not AuditEntry.objects.filter(action="token.grants").exists()
    _edit(client, "svc", "queue:orders=admin\n*=read\nqueue:billing=write")
    assert ApiToken.objects.get(name="svc").grants == "queue:orders=admin\n*=read\nqueue:billing=write"
    _edit(client, "svc", "queue:billing=read")
    assert ApiToken.objects.get(name="svc").grants == "queue:billing=read"
    # Once dropped, the superuser's grant is the operator's to give again, and it may not.
    assert "every name" in _refusal(_edit(client, "svc", "*=read"))
    assert ApiToken.objects.get(name="svc").grants == "queue:billing=read"


def test_a_superuser_makes_and_widens_any_token(root):
    """Admin scope, the whole store, a grant on ``*``: a superuser's to give,
    and nothing is refused."""
    user, client = root
    configure("orders")
    secret = _secret(_add(client, "deleter", "admin"))
    assert ApiToken.objects.get(name="deleter").created_by == user
    assert _api(secret).delete("/api/v1/resources/queues/orders").status_code == 200
    _secret(_add(client, "limited", "admin", "queue:orders=admin"))
    _edit(client, "limited", "*=admin")
    assert ApiToken.objects.get(name="limited").grants == "*=admin"
    _edit(client, "limited", "")
    assert ApiToken.objects.get(name="limited").grants == ""
    assert not AuditEntry.objects.filter(action="token.refuse").exists()


def test_deleting_the_account_revokes_the_tokens_it_made(otto, root, committing):
    """The API answers 401 with them from then on, each revocation is in the
    audit, and tokens made by others or before makers were recorded keep
    working."""
    user, client = otto
    mine = _secret(_add(client, "otto-svc", "write", "queue:orders.*=write"))
    theirs = _secret(_add(root[1], "root-svc", "write"))
    older = tokens.token_create(name="older", by=tokens.HOST)
    assert _api(mine).get("/api/v1/resources/queues").status_code == 200
    with committing():
        done = root[1].post(f"/admin/auth/user/{user.pk}/delete/", {"post": "yes"})
    assert done.status_code == 302
    assert not User.objects.filter(username="otto").exists()
    assert _api(mine).get("/api/v1/resources/queues").status_code == 401
    assert _api(theirs).get("/api/v1/resources/queues").status_code == 200
    assert _api(older).get("/api/v1/resources/queues").status_code == 200
    row = ApiToken.objects.get(name="otto-svc")
    assert row.revoked_at is not None
    assert row.created_by is None
    assert row.created_by_name == "otto"
    entry = AuditEntry.objects.get(action="token.revoke", target="otto-svc")
    assert (entry.actor, entry.via) == ("otto", "account")
    assert "deleted" in entry.reason
    assert "otto (account deleted)" in root[1].get(TOKENS).content.decode()


def test_deactivating_the_account_revokes_the_tokens_it_made(otto, committing):
    """Saving the account inactive revokes its tokens (audited) for good:
    making it active again brings none back."""
    user, client = otto
    first = _secret(_add(client, "first", "write", "queue:a=write"))
    second = _secret(_add(client, "second", "write", "queue:b=write"))
    user.is_active = False
    with committing():
        user.save()
    assert _api(first).get("/api/v1/resources/queues").status_code == 401
    assert _api(second).get("/api/v1/resources/queues").status_code == 401
    assert set(ApiToken.objects.filter(revoked_at__isnull=False).values_list("name", flat=True)) == {"first", "second"}
    entry = AuditEntry.objects.get(action="token.revoke", target="first")
    assert (entry.actor, entry.via) == ("otto", "account")
    assert "deactivated" in entry.reason
    user.is_active = True
    user.save()
    assert _api(first).get("/api/v1/resources/queues").status_code == 401


def test_a_bulk_deactivated_accounts_tokens_are_refused(otto, settings):
    """An account made inactive behind the models' back (no signal) revokes
    nothing, but its tokens answer 401 until it is active again."""
    settings.QUEENADMIN_TOKEN_CACHE_SECONDS = 0
    user, client = otto
    secret = _secret(_add(client, "svc", "write", "queue:a=write"))
    User.objects.filter(pk=user.pk).update(is_active=False)
    assert _api(secret).get("/api/v1/resources/queues").status_code == 401
    User.objects.filter(pk=user.pk).update(is_active=True)
    assert _api(secret).get("/api/v1/resources/queues").status_code == 200


def test_a_refusal_table_of_what_an_operator_may_give():
    """The domain's rule, for making (``NEW``) and for changing a token's
    grants: at most write, grants that name what they reach; a grant the
    token holds already may stay, dropping every grant may not."""
    operator = tokens.Maker(account_id=1, account_name="otto", unlimited=False)
    write, admin = TokenScope.WRITE, TokenScope.ADMIN

    def grants(*lines: str) -> tokens.Grants | None:
        return tokens.grants_parse(lines)

    table = [
        (write, grants("queue:orders.*=write", "*:billing=read"), tokens.NEW, None),
        (write, grants("queue:o*=write"), tokens.NEW, None),
        (admin, grants("queue:orders=write"), tokens.NEW, "admin scope"),
        (write, None, tokens.NEW, "whole store"),
        (write, grants("lock:*=read"), tokens.NEW, "every name of lock"),
        (write, grants("*:*=read"), tokens.NEW, "every name of every kind"),
        (admin, grants("queue:a=admin"), grants("queue:a=admin"), None),
        (admin, grants("queue:a=admin", "queue:b=write"), grants("queue:a=admin"), None),
        (admin, grants("queue:b=admin"), grants("queue:a=admin"), "gives admin scope"),
        (admin, grants("queue:a=write"), None, None),
        (admin, None, None, None),
        (write, None, grants("queue:a=write"), "whole store"),
        (write, grants("*=read", "queue:b=write"), grants("*=read"), None),
    ]
    for scope, given, before, said in table:
        refused = tokens.token_refusal(by=operator, scope=scope, grants=given, before=before)
        assert (said is None and refused is None) or (said is not None and refused and said in refused), (
            scope,
            given,
            before,
            refused,
        )
        assert tokens.token_refusal(by=tokens.HOST, scope=scope, grants=given, before=before) is None


def test_apitoken_acts_as_the_host_unless_told_by_an_account(otto, capsys):
    """Without ``--by`` the command makes any token and names no account;
    ``--by USER`` holds it to what USER may give (refusals audited, via
    command), names USER as its maker, and refuses an unknown account."""
    user, _ = otto
    call_command("apitoken", "create", "host-admin", "--scope", "admin", "--reason", "bootstrap")
    made = ApiToken.objects.get(name="host-admin")
    assert (made.scope, made.grants, made.created_by) == ("admin", "", None)
    entry = AuditEntry.objects.get(action="token.create", target="host-admin")
    assert (entry.via, entry.reason) == ("command", "bootstrap")
    with pytest.raises(CommandError, match="only a superuser may make a token of admin scope"):
        call_command("apitoken", "create", "otto-admin", "--scope", "admin", "--by", "otto")
    with pytest.raises(CommandError, match="whole store"):
        call_command("apitoken", "create", "otto-all", "--by", "otto")
    assert not ApiToken.objects.filter(name__startswith="otto-").exists()
    assert AuditEntry.objects.filter(action="token.refuse", via="command").count() == 2
    capsys.readouterr()
    call_command("apitoken", "create", "otto-svc", "--by", "otto", "--grant", "queue:orders.*=write")
    secret = capsys.readouterr().out.strip().splitlines()[-1]
    assert ApiToken.objects.get(name="otto-svc").created_by == user
    assert "made by account otto" in AuditEntry.objects.get(action="token.create", target="otto-svc").after
    with pytest.raises(CommandError, match="whole store"):
        call_command("apitoken", "grants", "otto-svc", "--by", "otto")
    call_command("apitoken", "grants", "otto-svc")
    assert ApiToken.objects.get(name="otto-svc").grants == ""
    with pytest.raises(CommandError, match="no active account"):
        call_command("apitoken", "create", "x", "--by", "nobody", "--grant", "queue:x=read")
    capsys.readouterr()
    call_command("apitoken", "list")
    listed = {line.split("\t")[0]: line.split("\t")[5] for line in capsys.readouterr().out.splitlines()}
    assert listed == {"host-admin": "by -", "otto-svc": "by otto"}
    user.delete()
    assert _api(secret).get("/api/v1/resources/queues").status_code == 401

"""Login throttling on the dashboard's and the admin's logins (django-axes):
five failures lock the account, and apart from it the client address, for
15 minutes; the next attempts are refused before any password is checked;
each lockout is audited once; a command and an admin action unlock.

The client address is ``REMOTE_ADDR``, as the server set it (behind a
trusted proxy uvicorn puts the forwarded address there:
``test_behind_proxy.py`` runs that through ``serve``).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.hashers import MD5PasswordHasher
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from queenadmin.domain import logins
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
HOME = "198.51.100.7"
ELSEWHERE = "198.51.100.8"


class CountingHasher(MD5PasswordHasher):
    """MD5 (as the suite's other tests hash), counting the passwords it checks."""

    checked = 0

    def verify(self, password: str, encoded: str) -> bool:
        type(self).checked += 1
        return super().verify(password, encoded)


@pytest.fixture
def hasher(settings):
    settings.PASSWORD_HASHERS = [f"{__name__}.CountingHasher"]
    CountingHasher.checked = 0
    return CountingHasher


@pytest.fixture
def alice(hasher) -> User:
    return User.objects.create_user("alice", password="right", is_staff=True)


@pytest.fixture
def frozen():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


def attempt(client: Client, username: str, password: str, address: str = HOME, path: str = "/login/", **headers):
    return client.post(path, {"username": username, "password": password}, REMOTE_ADDR=address, **headers)


def fail(client: Client, times: int, username: str = "alice", address: str = HOME, path: str = "/login/") -> None:
    for _ in range(times):
        response = attempt(client, username, "wrong", address, path)
        assert response.status_code in (200, 429)


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_the_sixth_wrong_password_is_refused_without_being_checked(client, alice, frozen):
    """Four failures answer the form again; the fifth locks (429); the sixth
    and a right password after it are refused without a password check."""
    for n in range(1, 5):
        response = attempt(client, "alice", "wrong")
        assert response.status_code == 200
        assert CountingHasher.checked == n
    fifth = attempt(client, "alice", "wrong")
    assert fifth.status_code == 429
    assert CountingHasher.checked == 5
    sixth = attempt(client, "alice", "wrong")
    assert sixth.status_code == 429
    assert CountingHasher.checked == 5
    right = attempt(client, "alice", "right")
    assert right.status_code == 429
    assert CountingHasher.checked == 5
    assert not logged_in(client)


def test_the_lockout_page_says_how_long_to_wait(client, alice, frozen):
    """In the dashboard's frame: try again in N minutes, and Retry-After."""
    fail(client, 5)
    page = attempt(client, "alice", "right")
    html = page.content.decode()
    assert page.status_code == 429
    assert "Too many failed logins" in html
    assert "Try again in 15 minutes." in html
    assert 'class="topbar"' in html  # the dashboard's frame
    assert page["Retry-After"] == str(15 * 60)
    frozen.shift(timedelta(minutes=14, seconds=30))
    later = attempt(client, "alice", "right")
    assert "Try again in 1 minute." in later.content.decode()
    assert later["Retry-After"] == "30"


def test_a_locked_account_gets_in_with_its_right_password_once_the_lockout_ends(client, alice, frozen):
    """Refused until 15 minutes after the last failure, then let in; the
    attempts refused meanwhile do not make the lockout longer."""
    fail(client, 5)
    frozen.shift(timedelta(minutes=10))
    assert attempt(client, "alice", "right").status_code == 429
    frozen.shift(timedelta(minutes=4, seconds=59))
    assert attempt(client, "alice", "right").status_code == 429
    assert not logged_in(client)
    frozen.shift(timedelta(seconds=2))
    response = attempt(client, "alice", "right")
    assert response.status_code == 302
    assert logged_in(client)


def test_a_successful_login_forgets_the_failures_before_it(client, alice, frozen):
    fail(client, 4)
    assert attempt(client, "alice", "right").status_code == 302
    client.post("/logout/")
    fail(client, 4)
    assert attempt(client, "alice", "right").status_code == 302


def test_each_lockout_is_audited_once(client, alice, frozen):
    """The entry names the address as the actor and the account as the target."""
    fail(client, 5)
    fail(client, 3)
    attempt(client, "alice", "right")
    entry = AuditEntry.objects.get()
    assert (entry.kind, entry.action, entry.actor, entry.target, entry.via) == (
        "login",
        "login.lockout",
        HOME,
        "alice",
        "dashboard",
    )
    assert entry.at == T0
    assert entry.reason == "5 failed logins within 15 minutes"
    assert "account until 2026-05-01 12:15:00 UTC" in entry.after
    assert "address until 2026-05-01 12:15:00 UTC" in entry.after
    frozen.shift(timedelta(minutes=16))
    fail(client, 5)
    assert AuditEntry.objects.filter(action="login.lockout").count() == 2


def test_an_address_is_locked_out_for_every_account(client, alice, frozen):
    """Five failures from one address, each for another name: that address
    is refused for alice too, while another address lets her in."""
    for n in range(5):
        attempt(client, f"guess{n}", "wrong", HOME)
    assert attempt(client, "alice", "right", HOME).status_code == 429
    entry = AuditEntry.objects.get(action="login.lockout")
    assert (entry.target, entry.actor) == (HOME, HOME)
    assert entry.after == "locked: address until 2026-05-01 12:15:00 UTC"
    other = Client()
    assert attempt(other, "alice", "right", ELSEWHERE).status_code == 302


def test_an_account_is_locked_out_from_every_address(client, alice, frozen):
    """Five failures for alice, each from another address: she is refused
    from a sixth; another account from those addresses is not."""
    for n in range(5):
        attempt(client, "alice", "wrong", f"203.0.113.{n + 1}")
    assert attempt(client, "alice", "right", "203.0.113.99").status_code == 429
    User.objects.create_user("bob", password="pw", is_staff=True)
    assert attempt(Client(), "bob", "pw", "203.0.113.1").status_code == 302


def test_a_forwarded_for_header_is_not_the_address(client, alice, frozen):
    """A client's own X-Forwarded-For (or X-Real-IP) changes nothing: the
    address is the one the server set, so rotating the header does not
    escape the address's lockout."""
    for n in range(5):
        attempt(
            client,
            f"guess{n}",
            "wrong",
            HOME,
            HTTP_X_FORWARDED_FOR=f"192.0.2.{n}",
            HTTP_X_REAL_IP=f"192.0.2.{n}",
        )
    refused = attempt(client, "alice", "right", HOME, HTTP_X_FORWARDED_FOR="192.0.2.200")
    assert refused.status_code == 429
    assert set(AccessAttemptAddresses()) == {HOME}


def AccessAttemptAddresses():
    from axes.models import AccessAttempt

    return AccessAttempt.objects.values_list("ip_address", flat=True)


def test_the_admin_login_is_throttled_too(client, alice, frozen):
    """Same counts (one lockout for both logins), the admin's own page."""
    fail(client, 3, path="/admin/login/")
    fail(client, 2, path="/login/")
    page = attempt(client, "alice", "right", path="/admin/login/")
    html = page.content.decode()
    assert page.status_code == 429
    assert "Too many failed logins. Try again in 15 minutes." in html
    assert "Django administration" in html or "site-name" in html  # the admin's frame
    assert CountingHasher.checked == 5
    assert AuditEntry.objects.get(action="login.lockout").via == "dashboard"


def test_a_lockout_on_the_admin_login_is_audited_as_the_admins(client, alice, frozen):
    fail(client, 5, path="/admin/login/")
    assert AuditEntry.objects.get(action="login.lockout").via == "admin"


def test_the_unlock_command_lets_the_account_in_again(client, alice, frozen):
    fail(client, 5)
    listed = io.StringIO()
    call_command("unlock_login", "--list", stdout=listed)
    assert listed.getvalue().splitlines() == ["account\talice", f"address\t{HOME}"]
    out = io.StringIO()
    call_command("unlock_login", "--user", "alice", "--reason", "she called", stdout=out)
    assert out.getvalue() == "account alice: unlocked (1 failed-login record forgotten)\n"
    assert attempt(client, "alice", "right").status_code == 302
    entry = AuditEntry.objects.get(action="login.unlock")
    assert (entry.target, entry.via, entry.reason) == ("alice", "command", "she called")
    assert entry.after == "unlocked: account alice"


def test_the_unlock_command_unlocks_an_address(client, alice, frozen):
    for n in range(5):
        attempt(client, f"guess{n}", "wrong", HOME)
    out = io.StringIO()
    call_command("unlock_login", "--address", HOME, "--user", "nobody", stdout=out)
    assert out.getvalue().splitlines() == [
        "account nobody: nothing to unlock",
        f"address {HOME}: unlocked (5 failed-login records forgotten)",
    ]
    assert attempt(client, "alice", "right", HOME).status_code == 302
    with pytest.raises(CommandError, match="--user NAME and/or --address IP"):
        call_command("unlock_login")


def _admin_client(*, superuser: bool) -> Client:
    user = (
        User.objects.create_superuser("root", "", "pw")
        if superuser
        else User.objects.create_user("staff", password="pw", is_staff=True)
    )
    client = Client()
    client.force_login(user)
    return client


def test_the_admin_action_unlocks_after_asking_why(client, alice, frozen):
    from axes.models import AccessAttempt

    fail(client, 5)
    admin = _admin_client(superuser=True)
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200
    assert "alice" in listing.content.decode()
    ids = [str(pk) for pk in AccessAttempt.objects.values_list("pk", flat=True)]
    asked = admin.post("/admin/axes/accessattempt/", {"action": "unlock", "_selected_action": ids})
    assert asked.status_code == 200
    assert "Reason" in asked.content.decode()
    assert attempt(Client(), "alice", "right").status_code == 429
    done = admin.post(
        "/admin/axes/accessattempt/",
        {"action": "unlock", "_selected_action": ids, "confirmed": "1", "reason": "verified by phone"},
    )
    assert done.status_code == 302
    assert not AccessAttempt.objects.exists()
    assert attempt(Client(), "alice", "right").status_code == 302
    entry = AuditEntry.objects.get(action="login.unlock")
    assert (entry.actor, entry.via, entry.reason, entry.target) == ("root", "admin", "verified by phone", "alice")
    assert entry.after == f"unlocked: account alice, address {HOME}"


def test_the_admin_action_needs_the_permission(client, alice, frozen):
    from axes.models import AccessAttempt

    fail(client, 5)
    staff = _admin_client(superuser=False)
    ids = [str(pk) for pk in AccessAttempt.objects.values_list("pk", flat=True)]
    form = {"action": "unlock", "_selected_action": ids, "confirmed": "1", "reason": "r"}
    assert staff.post("/admin/axes/accessattempt/", form).status_code == 403
    assert AccessAttempt.objects.exists()


def test_unlocking_needs_an_account_or_an_address():
    from queenadmin.domain.audit import Who
    from queenadmin.errors import InvalidArgument

    with pytest.raises(InvalidArgument):
        logins.login_unlock(who=Who("root", "", "command"))


def test_the_api_is_not_throttled_by_logins(client, alice, frozen, api_token):
    """Bearer-token calls are no logins: a locked-out address still reaches the API."""
    for n in range(5):
        attempt(client, f"guess{n}", "wrong", "127.0.0.1")
    response = client.get("/api/v1/resources/queues", HTTP_AUTHORIZATION=f"Bearer {api_token}")
    assert response.status_code == 200


@pytest.fixture
def api_token(db):
    from queenadmin.domain import tokens

    return tokens.token_create(by=tokens.HOST, name="svc")


def test_the_audit_page_lists_lockouts(client, alice, frozen):
    fail(client, 5)
    admin = _admin_client(superuser=True)
    page = admin.get("/audit/?kind=login")
    html = page.content.decode()
    assert page.status_code == 200
    assert "login.lockout" in html
    assert '<option value="login" selected>' in html

"""Two-factor login: an authenticator app (TOTP) and recovery codes.

The codes are computed here as an authenticator app would, from the secret
the enrolment page shows (RFC 6238: HMAC-SHA1 over the 30-second step
count), never with the server's own code.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import struct
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings

from queenadmin.dashboard.permissions import OPERATORS_GROUP, VIEWERS_GROUP
from queenadmin.domain.audit import Who
from queenadmin.domain.twofactor import twofactor_enrol_begin, twofactor_enrol_confirm
from queenadmin.models import AuditEntry

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 12, 0, 10, tzinfo=UTC)


def totp(secret_b32: str, at: datetime, *, step: int = 30, digits: int = 6) -> str:
    """RFC 6238's TOTP with HMAC-SHA1, as authenticator apps compute it."""
    key = base64.b32decode(secret_b32 + "=" * (-len(secret_b32) % 8))
    counter = struct.pack(">Q", int(at.timestamp()) // step)
    mac = hmac.new(key, counter, hashlib.sha1).digest()
    offset = mac[-1] & 0x0F
    value = struct.unpack(">I", mac[offset : offset + 4])[0] & 0x7FFFFFFF
    return f"{value % 10**digits:0{digits}d}"


def test_the_code_helper_gives_rfc_6238s_test_values():
    """RFC 6238 appendix B, SHA1, with 8 digits."""
    secret = base64.b32encode(b"12345678901234567890").decode()
    assert totp(secret, datetime.fromtimestamp(59, UTC), digits=8) == "94287082"
    assert totp(secret, datetime.fromtimestamp(1111111109, UTC), digits=8) == "07081804"
    assert totp(secret, datetime.fromtimestamp(20000000000, UTC), digits=8) == "65353130"


@pytest.fixture
def frozen():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def required(settings):
    settings.QUEENADMIN_REQUIRE_2FA = True


def _member(name: str, group: str) -> User:
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
    return user


@pytest.fixture
def otto(db) -> User:
    return _member("otto", OPERATORS_GROUP)


@pytest.fixture
def vera(db) -> User:
    return _member("vera", VIEWERS_GROUP)


def enrol(user: User, at: datetime) -> tuple[str, tuple[str, ...]]:
    """Set up an authenticator through the domain: its secret and recovery codes."""
    enrolment = twofactor_enrol_begin(user=user)
    done = twofactor_enrol_confirm(user=user, code=totp(enrolment.secret, at), who=Who(user.username))
    assert done.confirmed
    return enrolment.secret, done.recovery_codes


def password(client: Client, username: str, next_url: str = "/locks/"):
    return client.post("/login/", {"username": username, "password": "pw", "next": next_url})


def logged_in(client: Client) -> bool:
    return "_auth_user_id" in client.session


def test_with_the_setting_off_an_operator_logs_in_with_the_password(client, otto):
    response = password(client, "otto")
    assert (response.status_code, response["Location"]) == (302, "/locks/")
    assert client.get("/locks/").status_code == 200


def test_with_the_setting_on_a_viewer_still_logs_in_with_the_password(client, vera, required):
    assert password(client, "vera")["Location"] == "/locks/"
    assert client.get("/locks/").status_code == 200


def test_an_operator_sets_up_an_authenticator_to_finish_logging_in(client, otto, required, frozen):
    """The password alone logs nothing in; the page shows the QR code and the
    secret; a wrong code is refused; the right one logs in and shows ten
    recovery codes, that once."""
    response = password(client, "otto")
    assert response["Location"] == "/account/two-factor/"
    assert not logged_in(client)
    assert client.get("/locks/").status_code == 302  # to the login page

    page = client.get("/account/two-factor/")
    assert "must log in with two factors" in page.content.decode()
    assert client.post("/account/two-factor/", {"step": "begin"})["Location"] == "/account/two-factor/"
    html = client.get("/account/two-factor/").content.decode()
    secret = re.search(r'<code id="totp-secret">([A-Z2-7]+)</code>', html).group(1)
    assert "<svg" in html  # the QR code, drawn here
    assert f"otpauth://totp/queenadmin%3Aotto?secret={secret}" in html.replace("&amp;", "&")
    assert "issuer=queenadmin" in html

    wrong = client.post("/account/two-factor/", {"step": "confirm", "code": "000000"})
    assert wrong.status_code == 422
    assert "does not match" in wrong.content.decode()
    assert not logged_in(client)

    confirmed = client.post("/account/two-factor/", {"step": "confirm", "code": totp(secret, T0)})
    assert confirmed.status_code == 200
    assert "no-store" in confirmed["Cache-Control"]
    codes = re.findall(r"<li><code>([a-z2-7]{4}-[a-z2-7]{4})</code></li>", confirmed.content.decode())
    assert len(set(codes)) == 10
    assert 'href="/locks/"' in confirmed.content.decode()
    assert logged_in(client)
    assert client.get("/locks/").status_code == 200
    again = client.get("/account/two-factor/").content.decode()
    assert not any(code in again for code in codes)
    entry = AuditEntry.objects.get(action="login.2fa_enrol")
    assert (entry.actor, entry.target, entry.kind) == ("otto", "otto", "login")


def test_login_with_the_authenticators_code(client, otto, required, frozen):
    secret, _ = enrol(otto, T0)
    frozen.shift(timedelta(seconds=60))
    response = password(client, "otto")
    assert response["Location"] == "/login/code/"
    assert not logged_in(client)
    assert client.get("/locks/").status_code == 302
    assert "otto logs in with two factors" in client.get("/login/code/").content.decode()
    done = client.post("/login/code/", {"code": totp(secret, T0 + timedelta(seconds=60))})
    assert (done.status_code, done["Location"]) == (302, "/locks/")
    assert logged_in(client)
    assert client.get("/locks/").status_code == 200


def test_a_wrong_code_is_refused_and_counts_as_a_failed_login(client, otto, required, frozen):
    secret, _ = enrol(otto, T0)
    frozen.shift(timedelta(seconds=60))
    password(client, "otto")
    wrong = client.post("/login/code/", {"code": "123456"})
    assert wrong.status_code == 200
    assert "does not match" in wrong.content.decode()
    assert not logged_in(client)
    from axes.models import AccessAttempt

    assert AccessAttempt.objects.get(username="otto").failures_since_start == 1
    # The right code after it still logs in.
    client.post("/login/code/", {"code": totp(secret, T0 + timedelta(seconds=60))})
    assert logged_in(client)


def test_five_wrong_codes_lock_the_account_out(client, otto, required, frozen):
    secret, _ = enrol(otto, T0)
    frozen.shift(timedelta(seconds=60))
    password(client, "otto")
    for _ in range(4):
        assert client.post("/login/code/", {"code": "123456"}).status_code == 200
    assert client.post("/login/code/", {"code": "123456"}).status_code == 429
    right = totp(secret, T0 + timedelta(seconds=60))
    # The pending login is gone, and the password step is refused now.
    assert client.post("/login/code/", {"code": right})["Location"] == "/login/"
    assert password(client, "otto").status_code == 429
    assert not logged_in(client)
    assert AuditEntry.objects.filter(action="login.lockout", target="otto").count() == 1


def test_a_code_logs_in_once(otto, required, frozen):
    """The same authenticator code cannot log in twice (RFC 6238 section 5.2)."""
    secret, _ = enrol(otto, T0)
    frozen.shift(timedelta(seconds=60))
    code = totp(secret, T0 + timedelta(seconds=60))
    first, second = Client(), Client()
    password(first, "otto")
    password(second, "otto")
    first.post("/login/code/", {"code": code})
    assert logged_in(first)
    assert "does not match" in second.post("/login/code/", {"code": code}).content.decode()
    assert not logged_in(second)


def test_a_recovery_code_logs_in_once(client, otto, required, frozen):
    _, codes = enrol(otto, T0)
    password(client, "otto")
    spelled = f"{codes[3][:4]}-{codes[3][4:]}".upper()  # as shown, typed in capitals
    assert client.post("/login/code/", {"code": spelled})["Location"] == "/locks/"
    assert logged_in(client)
    entry = AuditEntry.objects.get(action="login.recovery_code")
    assert (entry.target, entry.after) == ("otto", "9 recovery codes left")
    client.post("/logout/")
    password(client, "otto")
    assert "does not match" in client.post("/login/code/", {"code": codes[3]}).content.decode()
    assert not logged_in(client)
    assert client.post("/login/code/", {"code": codes[4]})["Location"] == "/locks/"


def test_a_set_up_second_factor_is_asked_for_with_the_setting_off(client, otto, frozen):
    enrol(otto, T0)
    assert password(client, "otto")["Location"] == "/login/code/"
    assert not logged_in(client)


def test_a_pending_login_cannot_replace_the_second_factor(client, otto, required, frozen):
    """A right password for an account that has an authenticator does not
    open the enrolment page: that would let a stolen password replace it."""
    enrol(otto, T0)
    password(client, "otto")
    assert client.get("/account/two-factor/")["Location"] == "/login/"
    assert client.post("/account/two-factor/", {"step": "begin"})["Location"] == "/login/"
    from django_otp.plugins.otp_totp.models import TOTPDevice

    assert TOTPDevice.objects.filter(user=otto).count() == 1


def test_a_logged_in_user_opts_in_from_the_dashboard(client, vera, frozen):
    client.force_login(vera)
    assert "ask only for your password" in client.get("/account/two-factor/").content.decode()
    client.post("/account/two-factor/", {"step": "begin"})
    html = client.get("/account/two-factor/").content.decode()
    secret = re.search(r'<code id="totp-secret">([A-Z2-7]+)</code>', html).group(1)
    done = client.post("/account/two-factor/", {"step": "confirm", "code": totp(secret, T0)})
    assert len(re.findall(r"<li><code>", done.content.decode())) == 10
    assert "ask for a code" in client.get("/account/two-factor/").content.decode()
    client.post("/logout/")
    assert password(client, "vera")["Location"] == "/login/code/"


def test_a_session_without_the_second_factor_it_now_needs_is_logged_out(client, otto):
    """Logged in before the setting was turned on: its next page logs it out."""
    client.force_login(otto)
    assert client.get("/locks/").status_code == 200
    with override_settings(QUEENADMIN_REQUIRE_2FA=True):
        response = client.get("/locks/")
        assert response["Location"].startswith("/login/?next=/locks/")
        assert not logged_in(client)
        assert client.get("/admin/")["Location"].startswith("/admin/login/")


def admin_login(client: Client, username: str, code: str = ""):
    form = {"username": username, "password": "pw", "code": code, "next": "/admin/"}
    return client.post("/admin/login/?next=/admin/", form)


def test_the_admin_login_asks_for_the_code(client, otto, required, frozen):
    secret, _ = enrol(otto, T0)
    frozen.shift(timedelta(seconds=60))
    page = client.get("/admin/login/")
    assert 'name="code"' in page.content.decode()
    without = admin_login(client, "otto")
    assert without.status_code == 200
    assert "enter the current code" in without.content.decode()
    assert not logged_in(client)
    wrong = admin_login(client, "otto", "123456")
    assert "enter the current code" in wrong.content.decode()
    assert not logged_in(client)
    right = admin_login(client, "otto", totp(secret, T0 + timedelta(seconds=60)))
    assert (right.status_code, right["Location"]) == (302, "/admin/")
    assert client.get("/admin/").status_code == 200
    from axes.models import AccessAttempt

    assert not AccessAttempt.objects.exists()  # the login forgot the wrong code


def test_the_admin_login_sends_an_operator_without_a_second_factor_to_the_dashboard(client, otto, required):
    refused = admin_login(client, "otto")
    assert "set them up" in refused.content.decode()
    assert not logged_in(client)


def test_the_admin_login_takes_the_password_alone_with_the_setting_off(client, otto):
    assert admin_login(client, "otto")["Location"] == "/admin/"


def test_every_page_links_to_the_second_factors_setup(client, vera):
    """The status bar beside Log out leads to /account/two-factor/, where a user opts in."""
    password(client, "vera", "/")
    page = client.get("/locks/").content.decode()
    assert 'href="/account/two-factor/"' in page
    setup = client.get("/account/two-factor/")
    assert setup.status_code == 200

"""The dashboard's websocket and the second factor: with
``QUEENADMIN_REQUIRE_2FA`` on, a session that owes its second factor gets no
socket (closed 4401, as signed out), just as its next page logs it out; a
login finished with a real TOTP code gets the live page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from channels.testing.websocket import WebsocketCommunicator
from django.test import Client, override_settings

from queenadmin.dashboard.consumers import CLOSE_SIGNED_OUT
from queenadmin.server.app import _websocket as websocket_app
from tests.dashboard.test_two_factor import enrol, logged_in, password, totp

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("short_connections")]


@pytest.fixture(autouse=True)
def memory_layer():
    with override_settings(CHANNEL_LAYERS={"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}):
        yield


async def _open(client: Client, path: str = "/ws/locks/") -> tuple[WebsocketCommunicator, dict]:
    """The socket with ``client``'s session, and its first output."""
    cookie = client.cookies["sessionid"].value
    headers = [(b"origin", b"http://testserver"), (b"host", b"testserver"), (b"cookie", f"sessionid={cookie}".encode())]
    communicator = WebsocketCommunicator(websocket_app, path, headers=headers)
    connected, _ = await communicator.connect(timeout=10)
    assert connected, "accepted, to close with a reason the browser can read"
    return communicator, await communicator.receive_output(timeout=10)


async def test_a_session_logged_in_without_its_second_factor_gets_no_socket(operator, settings):
    """Logged in on the password before the setting was turned on: the socket
    is closed as signed out, and the next page logs the session out."""
    client = Client()
    await sync_to_async(client.force_login)(operator)
    communicator, first = await _open(client)
    assert first["type"] == "websocket.send"
    await communicator.disconnect()

    settings.QUEENADMIN_REQUIRE_2FA = True
    communicator, first = await _open(client)
    assert first == {"type": "websocket.close", "code": CLOSE_SIGNED_OUT}
    await communicator.disconnect()
    response = await sync_to_async(client.get)("/locks/")
    assert response["Location"].startswith("/login/?next=/locks/")
    assert not await sync_to_async(logged_in)(client)


async def test_a_password_waiting_for_its_code_gets_no_socket(operator, settings):
    settings.QUEENADMIN_REQUIRE_2FA = True
    await sync_to_async(enrol)(operator, datetime.now(UTC))
    client = Client()
    response = await sync_to_async(password)(client, "otto")
    assert response["Location"] == "/login/code/"
    communicator, first = await _open(client)
    assert first == {"type": "websocket.close", "code": CLOSE_SIGNED_OUT}
    await communicator.disconnect()
    # The pages send it to the code step too.
    assert (await sync_to_async(client.get)("/locks/"))["Location"].startswith("/login/")
    assert (await sync_to_async(client.get)("/login/code/")).status_code == 200


async def test_a_login_finished_with_a_real_code_gets_the_live_page(operator, settings):
    settings.QUEENADMIN_REQUIRE_2FA = True
    secret, _codes = await sync_to_async(enrol)(operator, datetime.now(UTC))
    client = Client()
    assert (await sync_to_async(password)(client, "otto"))["Location"] == "/login/code/"
    # The next 30-second step's code: the enrolment used this step's, and a
    # code is good once (django-otp allows one step of drift).
    code = totp(secret, datetime.now(UTC) + timedelta(seconds=30))
    done = await sync_to_async(client.post)("/login/code/", {"code": code})
    assert done["Location"] == "/locks/"
    communicator, first = await _open(client)
    assert first["type"] == "websocket.send"
    assert 'id="locks-holders"' in first["text"]
    await communicator.disconnect()


async def test_a_second_factor_demanded_while_the_socket_is_open_closes_it(operator, settings):
    """The check runs at every render, not only at connect."""
    client = Client()
    await sync_to_async(client.force_login)(operator)
    communicator, first = await _open(client)
    assert first["type"] == "websocket.send"
    settings.QUEENADMIN_REQUIRE_2FA = True
    await communicator.send_to(text_data="resync")
    assert await communicator.receive_output(timeout=10) == {"type": "websocket.close", "code": CLOSE_SIGNED_OUT}
    await communicator.disconnect()


async def test_a_viewer_needs_no_second_factor_for_the_socket(viewer, settings):
    settings.QUEENADMIN_REQUIRE_2FA = True
    client = Client()
    await sync_to_async(client.force_login)(viewer)
    communicator, first = await _open(client)
    assert first["type"] == "websocket.send"
    await communicator.disconnect()

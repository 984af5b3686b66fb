"""The live socket in a real browser: a page on another port of the same host
cannot read it with the operator's session cookie (the browser sends that
cookie, since cookies do not keep ports apart); the dashboard's own page can,
with the same script."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.browser.conftest import shot

pytestmark = pytest.mark.live

#: Opens the overview's socket; ``window.done`` resolves to what it got by
#: its first frame or its close.
READER = """
window.done = new Promise((resolve) => {
  const seen = {opened: false, frames: 0, closed: null, first: ""};
  const socket = new WebSocket(SOCKET_URL);
  socket.onopen = () => { seen.opened = true; };
  socket.onmessage = (event) => {
    seen.frames += 1;
    seen.first = String(event.data).slice(0, 300);
    resolve(seen);
  };
  socket.onclose = (event) => { seen.closed = event.code; resolve(seen); };
});
"""


class _OnePage(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def other_port(dash: Any) -> Iterator[str]:
    """A second HTTP server on 127.0.0.1, another port, serving one page that
    reads the dashboard's live socket."""
    socket_url = repr(dash.url.replace("http://", "ws://") + "/ws/overview/")
    script = READER.replace("SOCKET_URL", socket_url)
    handler = type(
        "Page", (_OnePage,), {"body": f"<!doctype html><title>other</title><script>{script}</script>".encode()}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_page_on_another_port_cannot_read_the_live_socket(dash, login, other_port):
    """Logged in as an operator, the browser opens a page on another port of
    127.0.0.1: its socket to ``/ws/overview/`` is refused at the handshake and
    gets no frame. The same script on the dashboard's own page gets the
    overview."""
    page = login(dash, "otto")
    socket_url = repr(dash.url.replace("http://", "ws://") + "/ws/overview/")
    # Evaluated by the browser's devtools, so the page's policy allows it.
    seen_own = page.evaluate("() => {" + READER.replace("SOCKET_URL", socket_url) + "return window.done; }")
    assert seen_own["opened"], seen_own
    assert seen_own["frames"] > 0, seen_own
    assert 'id="' in seen_own["first"], seen_own

    foreign = page.context.new_page()
    foreign.goto(other_port)
    seen = foreign.evaluate("() => window.done")
    shot(foreign, "socket-origin-other-port")
    assert seen == {"opened": False, "frames": 0, "closed": 1006, "first": ""}
    refusal = f"origin {other_port.rstrip('/')} is neither {dash.url} nor in QUEENADMIN_ORIGINS: refused"
    assert refusal in dash.log()

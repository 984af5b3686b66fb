"""The HTTP protocol ``serve`` runs: uvicorn's httptools protocol with a
deadline on request headers.

uvicorn times out an idle keep-alive connection (``timeout_keep_alive``)
but nothing else: a connection that sends half a request line, or a header
a minute, stays open for good (issue 13: 2,000 of them stayed open), and
every byte that trickles in cancels the keep-alive timer. Here a request's
headers must be complete within ``HEADER_TIMEOUT_SECONDS`` of the
connection opening or of the previous answer, else the connection is
closed. Bodies have their own deadline (``wsgi_bridge.read_body``).

It also notes in the scope when a request began to arrive (``ARRIVED_KEY``):
a long-poll pop's timeout runs from then, so time the request spent queued
behind other work on a busy event loop counts against its timeout instead
of being added to it.
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from queenadmin.conf import settings
from queenadmin.middleware import ARRIVED_KEY


class HeaderDeadlineProtocol(HttpToolsProtocol):
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[ARRIVED_KEY] = self.loop.time()  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._header_deadline = self.loop.call_later(settings.HEADER_TIMEOUT_SECONDS, self._headers_too_slow)

    def _disarm(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        # uvicorn types ``cycle`` as always set; it is None until a request.
        cycle = getattr(self, "cycle", None)
        busy = cycle is not None and not cycle.response_complete
        if not busy and not self.pipeline and not self.transport.is_closing():
            self.transport.close()

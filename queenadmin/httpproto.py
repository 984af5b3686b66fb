"""The HTTP protocol ``serve`` runs: uvicorn's httptools protocol with a
deadline on request headers.

uvicorn times out an idle keep-alive connection (``timeout_keep_alive``)
but nothing else: a connection that sends half a request line, or a header
a minute, stays open for good (issue 13: 2,000 of them stayed open), and
every byte that trickles in cancels the keep-alive timer. Here a request's
headers must be complete within ``HEADER_TIMEOUT_SECONDS`` of the
connection opening or of the previous answer, else the connection is
closed. Bodies have their own deadline (``wsgi_bridge.read_body``).

It writes each answer's head and its body in one ``write``: uvicorn writes
them apart, two system calls and two TCP segments per answer on which the
client wakes twice; the first write alone was 18% of the GIL time of a KV
put under load (issue 15). See ``_OneWriteTransport``.

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

#: Bodies up to this size are joined to their head in one bytes object;
#: larger ones are written after it (a copy would cost more than a call).
_JOIN_BELOW = 256 * 1024


class _OneWriteTransport:
    """The connection's transport, holding an answer's head for its body.

    The first write of an answer that is a final status line and headers
    (``HTTP/1.1 NNN``, not an interim ``1xx``) is held and goes out with the
    next write, the body; ``flush`` (the answer is complete: a ``HEAD``
    answer writes no body) and ``close`` send a held head alone. Everything
    else is the transport's own.
    """

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._held: bytes | None = None
        #: True until this answer's head went by.
        self.expect_head = True

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._held is not None:
            head, self._held = self._held, None
            if len(data) < _JOIN_BELOW:
                self._transport.write(head + bytes(data))
                return
            self._transport.write(head)
        elif self.expect_head and data[:9] == b"HTTP/1.1 " and data[9:10] != b"1":
            self.expect_head = False
            self._held = bytes(data)
            return
        self._transport.write(data)

    def flush(self) -> None:
        if self._held is not None:
            head, self._held = self._held, None
            self._transport.write(head)

    def next_answer(self) -> None:
        self.flush()
        self.expect_head = True

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> object:
        return getattr(self._transport, name)


class HeaderDeadlineProtocol(HttpToolsProtocol):
    _header_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        # After uvicorn's set-up, which reads the addresses and makes the
        # flow control on the transport itself.
        self.transport = _OneWriteTransport(transport)  # type: ignore[assignment]
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[ARRIVED_KEY] = self.loop.time()  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        self.transport.next_answer()  # type: ignore[attr-defined]
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

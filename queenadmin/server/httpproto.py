"""The HTTP protocol ``serve`` runs: uvicorn's httptools protocol with a
deadline on request headers, writing each answer's head with its body.

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

uvicorn writes an answer's status line and headers when the app sends
``http.response.start`` and its body at ``http.response.body``: two socket
writes, two TCP segments and two wake-ups of the client per answer, and on
loopback the kernel delivers each segment inside the ``write`` call, with
the GIL held. ``OneWriteCycle`` keeps the head of a sized answer (one with
Content-Length, which every buffered answer of the WSGI bridge has) until
its first body chunk and writes both at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from queenadmin.conf import settings
from queenadmin.plumbing import ARRIVED_KEY, compat

#: Bodies up to this size are joined to their head (one small copy); larger
#: ones go out with the head in one vectored write, uncopied.
_JOIN_BELOW = 64 * 1024


class _KeepWrite:
    """The transport while uvicorn writes an answer's head: keeps the bytes."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.data = b""

    def write(self, data: bytes) -> None:
        self.data += data

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class _WriteWithHead:
    """The transport while uvicorn sends the first body chunk: its one
    write carries the held head too. Closing writes a head still held
    (an answer with no body bytes, e.g. to HEAD) before it closes."""

    def __init__(self, transport: Any, head: bytes) -> None:
        self.transport = transport
        self.head = head

    def write(self, data: bytes) -> None:
        head, self.head = self.head, b""
        if not head:
            self.transport.write(data)
        elif len(data) < _JOIN_BELOW:
            self.transport.write(head + data)
        else:
            self.transport.writelines((head, data))

    def flush(self) -> None:
        if self.head:
            self.write(b"")

    def close(self) -> None:
        self.flush()
        self.transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)


class OneWriteCycle(RequestResponseCycle):
    """uvicorn's request cycle, writing a sized answer's head with its body.

    Only answers that declare Content-Length are held: their body follows
    at once. An answer without it (chunked, possibly streaming events whose
    first chunk may be long in coming) has its head written at once, as
    uvicorn does.
    """

    _head: bytes = b""

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start" and not self.response_started:
            if not any(name.lower() == b"content-length" for name, _ in message.get("headers", ())):
                await super().send(message)
                return
            transport = self.transport
            kept = _KeepWrite(transport)
            self.transport = kept  # type: ignore[assignment]
            try:
                await super().send(message)
            finally:
                self.transport = transport
            self._head = kept.data
            return
        if not self._head:
            await super().send(message)
            return
        transport, writer = self.transport, _WriteWithHead(self.transport, self._head)
        self._head = b""
        self.transport = writer  # type: ignore[assignment]
        try:
            await super().send(message)
        finally:
            self.transport = transport
            if not self.disconnected:  # a closed transport refuses writes
                writer.flush()


class HeaderDeadlineProtocol(HttpToolsProtocol):
    #: Loop time by which the next request's headers must be in; None while
    #: a request is being served.
    _headers_due: float | None = None
    #: One timer per connection, moved lazily: a keep-alive connection
    #: serving many requests re-arms the deadline by setting ``_headers_due``
    #: (a call_later and a cancel per request cost ~1% of a KV put's CPU);
    #: the timer, when it fires early, waits again until that time.
    _deadline_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope[ARRIVED_KEY] = self.loop.time()  # type: ignore[literal-required]

    def on_headers_complete(self) -> None:
        self._headers_due = None
        super().on_headers_complete()
        # Every cycle, the first and any pipelined one, is made here; its
        # task has been created, not yet run.
        compat.use_cycle_class(self.cycle, OneWriteCycle)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._headers_due = None
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        due = self.loop.time() + settings.HEADER_TIMEOUT_SECONDS
        self._headers_due = due
        if self._deadline_timer is None:
            self._deadline_timer = self.loop.call_at(due, self._deadline_reached)

    def _deadline_reached(self) -> None:
        self._deadline_timer = None
        due = self._headers_due
        if due is None:
            return  # serving a request; the next _arm sets a new timer
        if self.loop.time() < due:
            self._deadline_timer = self.loop.call_at(due, self._deadline_reached)
            return
        self._headers_due = None
        self._headers_too_slow()

    def _headers_too_slow(self) -> None:
        # uvicorn types ``cycle`` as always set; it is None until a request.
        cycle = getattr(self, "cycle", None)
        busy = cycle is not None and not cycle.response_complete
        if not busy and not self.pipeline and not self.transport.is_closing():
            self.transport.close()

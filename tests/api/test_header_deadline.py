"""The header deadline on a kept-alive connection (``httpproto``).

The deadline is one timer per connection, moved forward by each answer:
a client that keeps sending requests in time is never cut off, however
many deadlines its connection outlives; one that stops half-way through
a request line is closed once the deadline after its last answer passes.
"""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.conftest import run_server

pytestmark = pytest.mark.live

DEADLINE_SECONDS = 1.0


async def _answer(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    return head + await reader.readexactly(length)


async def test_requests_in_time_keep_the_connection_and_a_stalled_one_is_closed():
    with run_server(extra_env={"QUEENADMIN_HEADER_TIMEOUT_SECONDS": str(DEADLINE_SECONDS)}) as server:
        host, port = server.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            opened = time.monotonic()
            # Requests 0.4 s apart for three deadlines: all answered on one connection.
            while time.monotonic() - opened < 3 * DEADLINE_SECONDS:
                writer.write(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                answer = await asyncio.wait_for(_answer(reader), 5)
                assert answer.startswith(b"HTTP/1.1 200 "), answer[:60]
                assert answer.endswith(b'{"status":"ok"}')
                await asyncio.sleep(0.4 * DEADLINE_SECONDS)
            # Half a request line, then nothing: closed at the deadline.
            writer.write(b"GET /hea")
            stalled = time.monotonic()
            assert await asyncio.wait_for(reader.read(), 10) == b""
            waited = time.monotonic() - stalled
            assert 0.4 * DEADLINE_SECONDS <= waited <= 3 * DEADLINE_SECONDS, waited
        finally:
            writer.close()

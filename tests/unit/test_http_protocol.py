"""serve's HTTP edge: one socket write per sized answer, the WSGI thread hop.

``OneWriteCycle`` is uvicorn's request cycle holding an answer's head until
its body: driven here with a transport that records what it is asked to
write (uvicorn's own objects otherwise). ``ThreadHop`` runs real threads.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import threading
from typing import Any

import pytest
from uvicorn.protocols.http.flow_control import FlowControl

from queenadmin.server.httpproto import OneWriteCycle
from queenadmin.server.wsgi_bridge import BodyRefused, ThreadHop, read_body


class RecordingTransport:
    """What the cycle writes and when it closes, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def write(self, data: bytes) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, chunks: Any) -> None:
        self.calls.append(("writelines", [bytes(c) for c in chunks]))

    def close(self) -> None:
        self.calls.append(("close", None))

    def is_closing(self) -> bool:
        return any(call == "close" for call, _ in self.calls)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


def _cycle(transport: RecordingTransport, *, method: str = "GET", keep_alive: bool = True) -> OneWriteCycle:
    scope = {"type": "http", "method": method, "path": "/", "http_version": "1.1", "headers": []}
    logger = logging.getLogger("test.http")
    return OneWriteCycle(
        scope=scope,  # type: ignore[arg-type]
        transport=transport,  # type: ignore[arg-type]
        flow=FlowControl(transport),  # type: ignore[arg-type]
        logger=logger,
        access_logger=logger,
        access_log=False,
        default_headers=[],
        message_event=asyncio.Event(),
        expect_100_continue=False,
        keep_alive=keep_alive,
        on_response=lambda: None,
    )


def _start(length: int | None) -> dict[str, Any]:
    headers = [(b"content-type", b"application/json")]
    if length is not None:
        headers.append((b"content-length", str(length).encode()))
    return {"type": "http.response.start", "status": 200, "headers": headers}


def _one_write(transport: RecordingTransport) -> bytes:
    """The one ``write`` the transport got, which starts with the status line."""
    assert len(transport.calls) == 1
    kind, data = transport.calls[0]
    assert kind == "write"
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    return data  # type: ignore[no-any-return]


async def test_a_sized_answer_is_one_write_of_head_and_body():
    transport = RecordingTransport()
    cycle = _cycle(transport)
    await cycle.send(_start(7))
    assert transport.calls == []  # the head waits for the body
    await cycle.send({"type": "http.response.body", "body": b'{"a":1}'})
    data = _one_write(transport)
    assert data.endswith(b'\r\n\r\n{"a":1}')
    assert b"content-length: 7\r\n" in data
    assert cycle.response_complete


async def test_a_large_body_goes_out_with_its_head_uncopied():
    transport = RecordingTransport()
    cycle = _cycle(transport)
    body = b"x" * (256 * 1024)
    await cycle.send(_start(len(body)))
    await cycle.send({"type": "http.response.body", "body": body})
    assert [kind for kind, _ in transport.calls] == ["writelines"]
    head, sent = transport.calls[0][1]
    assert head.startswith(b"HTTP/1.1 200 OK\r\n")
    assert head.endswith(b"\r\n\r\n")
    assert sent == body


async def test_an_answer_to_head_writes_its_head_alone():
    transport = RecordingTransport()
    cycle = _cycle(transport, method="HEAD")
    await cycle.send(_start(7))
    await cycle.send({"type": "http.response.body", "body": b""})
    assert _one_write(transport).endswith(b"\r\n\r\n")


async def test_the_head_is_written_before_the_connection_closes():
    transport = RecordingTransport()
    cycle = _cycle(transport, keep_alive=False)
    await cycle.send(_start(2))
    await cycle.send({"type": "http.response.body", "body": b"ok"})
    assert [kind for kind, _ in transport.calls] == ["write", "close"]
    assert transport.calls[0][1].endswith(b"\r\n\r\nok")
    assert b"connection: close\r\n" in transport.calls[0][1]


async def test_an_unsized_answer_writes_its_head_at_once():
    # A chunked answer may be a stream whose first chunk is long in coming.
    transport = RecordingTransport()
    cycle = _cycle(transport)
    await cycle.send(_start(None))
    assert len(transport.calls) == 1
    assert b"transfer-encoding: chunked\r\n" in transport.calls[0][1]
    await cycle.send({"type": "http.response.body", "body": b"abc", "more_body": True})
    await cycle.send({"type": "http.response.body", "body": b""})
    assert [data for _, data in transport.calls[1:]] == [b"3\r\nabc\r\n", b"0\r\n\r\n"]


async def test_a_streamed_sized_answer_sends_the_head_with_the_first_chunk_only():
    transport = RecordingTransport()
    cycle = _cycle(transport)
    await cycle.send(_start(6))
    await cycle.send({"type": "http.response.body", "body": b"abc", "more_body": True})
    await cycle.send({"type": "http.response.body", "body": b"def"})
    assert len(transport.calls) == 2
    assert transport.calls[0][1].endswith(b"\r\n\r\nabc")
    assert transport.calls[1] == ("write", b"def")


async def test_an_invalid_header_still_fails_as_uvicorn_fails_it():
    transport = RecordingTransport()
    cycle = _cycle(transport)
    start = {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1"), (b"x", b"a\nb")]}
    with pytest.raises(RuntimeError, match="Invalid HTTP header value"):
        await cycle.send(start)
    assert transport.calls == []


_who: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


async def test_the_thread_hop_runs_jobs_on_its_threads_in_the_callers_context():
    hop = ThreadHop(2, "hoptest")
    _who.set("caller")

    def job(n: int) -> tuple[int, str, str]:
        return n * 2, _who.get(), threading.current_thread().name

    results = await asyncio.gather(*(hop.run(job, n) for n in range(20)))
    assert [r[0] for r in results] == [n * 2 for n in range(20)]
    assert {r[1] for r in results} == {"caller"}
    assert {r[2] for r in results} <= {"hoptest_0", "hoptest_1"}
    assert threading.current_thread().name not in {r[2] for r in results}


async def _all_idle(hop: ThreadHop) -> None:
    """Until every thread of ``hop`` waits for a job (a bound, not a figure)."""
    for _ in range(2000):
        crew = getattr(hop, "_crew", None)
        if crew is None or len(crew.idle) == hop.size:
            return
        await asyncio.sleep(0.001)


async def test_a_lone_job_wakes_the_thread_idle_most_recently():
    """One job at a time runs on one thread, the one that ran the last:
    the others are not woken (they used to be, each job waking a second
    thread for nothing, and taking turns)."""
    hop = ThreadHop(4, "hoplifo")
    release = threading.Event()
    # Every thread started and busy once, so all four are idle afterwards.
    busy = [asyncio.ensure_future(hop.run(release.wait, 5)) for _ in range(4)]
    await asyncio.sleep(0.05)
    release.set()
    await asyncio.gather(*busy)
    names = []
    for _ in range(12):
        await _all_idle(hop)
        names.append(await hop.run(lambda: threading.current_thread().name))
    assert len(set(names)) == 1, names


async def test_the_thread_hop_hands_back_exceptions():
    hop = ThreadHop(1, "hoperr")

    def fails() -> None:
        raise LookupError("from the thread")

    with pytest.raises(LookupError, match="from the thread"):
        await hop.run(fails)
    # The thread survives the job's failure.
    assert await hop.run(lambda: 42) == 42


async def test_a_cancelled_wait_leaves_the_thread_hop_working():
    hop = ThreadHop(1, "hopcancel")
    release = threading.Event()
    waiting = asyncio.ensure_future(hop.run(release.wait, 5))
    await asyncio.sleep(0.05)
    waiting.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert await hop.run(lambda: "next") == "next"


async def test_a_job_cancelled_before_it_starts_is_dropped_where_asked():
    """With ``skip_cancelled`` (the pops' database threads), a job whose
    caller was cancelled while it queued never runs; without it, it does."""
    for skip, runs in ((True, []), (False, ["queued"])):
        hop = ThreadHop(1, "hopskip", skip_cancelled=skip)
        release = threading.Event()
        ran: list[str] = []
        busy = asyncio.ensure_future(hop.run(release.wait, 5))
        await asyncio.sleep(0.05)
        queued = asyncio.ensure_future(hop.run(ran.append, "queued"))
        await asyncio.sleep(0.01)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        assert await busy
        assert await hop.run(lambda: "next") == "next"
        assert ran == runs


async def test_a_client_gone_before_the_body_gets_nothing_written():
    transport = RecordingTransport()
    cycle = _cycle(transport)
    await cycle.send(_start(2))
    cycle.disconnected = True  # as uvicorn's connection_lost sets it
    await cycle.send({"type": "http.response.body", "body": b"ok"})
    assert transport.calls == []


async def test_the_hop_starts_threads_of_its_own_in_another_process():
    # What a forked child sees: the hop was started by another pid, whose
    # threads it does not have.
    hop = ThreadHop(1, "hoppid")
    assert await hop.run(lambda: 1) == 1
    parents_crew = hop._crew
    hop._pid = -1
    assert await asyncio.wait_for(hop.run(threading.current_thread), 5) is not threading.current_thread()
    assert hop._crew is not parents_crew
    assert hop._pid == os.getpid()


def test_a_forked_child_knows_its_own_pid_without_asking():
    """The hop compares a kept pid, not ``os.getpid()`` (a system call) per
    job: a forked child must have its own."""
    from queenadmin.server import wsgi_bridge

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through the pipe
        ok = False
        try:
            ok = getattr(wsgi_bridge, "_this_pid", None) == os.getpid()
        finally:
            os.write(write_end, b"1" if ok else b"0")
            os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read_end, 1) == b"1"
    assert getattr(wsgi_bridge, "_this_pid", None) == os.getpid()
    os.close(read_end)
    os.close(write_end)


async def test_a_body_already_read_is_taken_without_a_deadline():
    cycle = _cycle(RecordingTransport(), method="POST")
    cycle.scope["path"] = "/api/v1/kv"  # type: ignore[index]
    cycle.body = bytearray(b'{"a":1}')
    cycle.more_body = False  # as uvicorn's on_message_complete leaves it
    cycle.message_event.set()
    assert await read_body(cycle.scope, cycle.receive) == b'{"a":1}'  # type: ignore[arg-type]


async def test_a_body_still_arriving_is_held_to_the_deadline(settings):
    settings.QUEENADMIN_BODY_GRACE_SECONDS = 0.2
    cycle = _cycle(RecordingTransport(), method="POST")
    cycle.scope["path"] = "/api/v1/kv"  # type: ignore[index]
    cycle.body = bytearray(b'{"a":')  # more to come, and it never does
    cycle.message_event.set()
    with pytest.raises(BodyRefused) as refused:
        await asyncio.wait_for(read_body(cycle.scope, cycle.receive), 5)  # type: ignore[arg-type]
    assert refused.value.status == 408

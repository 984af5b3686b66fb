"""The API handler's request signals: Django's receivers' work done in place,
any other receiver still reached through the signals."""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.http import HttpResponse
from django.test import override_settings

from queenadmin.plumbing import compat
from queenadmin.server import handlers as apihandler


class FakeConnection:
    def __init__(self) -> None:
        self.queries_log = [{"sql": "SELECT 1"}]
        self.checks = 0

    def close_if_unusable_or_obsolete(self) -> None:
        self.checks += 1


class FakeConnections:
    def __init__(self, conn: FakeConnection) -> None:
        self.conn = conn

    def all(self, initialized_only: bool = False) -> list[FakeConnection]:
        assert initialized_only
        return [self.conn]


@pytest.fixture
def conn(monkeypatch: pytest.MonkeyPatch) -> FakeConnection:
    fake = FakeConnection()
    monkeypatch.setattr(apihandler, "connections", FakeConnections(fake))
    return fake


@pytest.fixture
def without_close_old_connections() -> Iterator[None]:
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def seen() -> Iterator[list[tuple[str, Any]]]:
    """Another receiver of ``request_started`` and ``request_finished``, connected
    for the test: what it was sent, in order, as (signal, sender)."""
    got: list[tuple[str, Any]] = []

    def started(sender: Any, **kwargs: Any) -> None:
        got.append(("started", sender))

    def finished(sender: Any, **kwargs: Any) -> None:
        got.append(("finished", sender))

    request_started.connect(started)
    request_finished.connect(finished)
    yield got
    request_started.disconnect(started)
    request_finished.disconnect(finished)


def _health_environ() -> dict[str, Any]:
    return {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/health",
        "QUERY_STRING": "",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": io.StringIO(),
    }


def _health(handler: apihandler.ApiWSGIHandler) -> int:
    environ = _health_environ()
    statuses: list[int] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        statuses.append(int(status.split()[0]))

    answer = handler(environ, start_response)
    assert b"".join(answer) == b'{"status":"ok"}'
    answer.close()
    return statuses[0]


def test_django_receivers_alone_are_run_in_place(conn: FakeConnection) -> None:
    """Each initialized connection has its queries log cleared and its
    lifetime checked when the request begins, and checked again when it ends."""
    assert compat.only_receivers(request_started, apihandler.DJANGO_STARTED_RECEIVERS)
    assert compat.only_receivers(request_finished, apihandler.DJANGO_FINISHED_RECEIVERS)
    assert _health(apihandler.ApiWSGIHandler()) == 200
    assert conn.queries_log == []
    assert conn.checks == 2


@pytest.mark.usefixtures("without_close_old_connections")
def test_another_receiver_gets_both_signals(conn: FakeConnection, seen: list[tuple[str, Any]]) -> None:
    assert _health(apihandler.ApiWSGIHandler()) == 200
    assert seen == [("started", apihandler.ApiWSGIHandler), ("finished", apihandler.ApiWSGIHandler)]
    # Through the signals, not in place.
    assert conn.checks == 0


@pytest.mark.usefixtures("without_close_old_connections")
def test_a_receiver_disconnected_is_not_run(conn: FakeConnection) -> None:
    """Django's test client disconnects ``close_old_connections`` (the
    test's transaction holds the connection): the handler leaves it alone."""
    assert not compat.only_receivers(request_started, apihandler.DJANGO_STARTED_RECEIVERS)
    assert not compat.only_receivers(request_finished, apihandler.DJANGO_FINISHED_RECEIVERS)
    assert _health(apihandler.ApiWSGIHandler()) == 200
    assert conn.checks == 0


def test_a_receiver_for_one_sender_is_not_one_of_djangos() -> None:
    request_started.disconnect(close_old_connections)
    request_started.connect(close_old_connections, sender=apihandler.ApiWSGIHandler)
    try:
        assert not compat.only_receivers(request_started, apihandler.DJANGO_STARTED_RECEIVERS)
    finally:
        request_started.disconnect(close_old_connections, sender=apihandler.ApiWSGIHandler)
        request_started.connect(close_old_connections)
    assert compat.only_receivers(request_started, apihandler.DJANGO_STARTED_RECEIVERS)


def test_an_answer_is_freed_without_the_garbage_collector(conn: FakeConnection) -> None:
    """The handler's ``close`` on the answer refers to the answer: closing
    it breaks that cycle, so the answer goes when its last reference does."""
    import gc
    import weakref

    handler = apihandler.ApiWSGIHandler()
    _health(handler)  # warm: URL resolving keeps what it keeps
    gc.disable()
    try:
        answer = handler(_health_environ(), lambda status, headers, exc_info=None: None)
        gone = weakref.ref(answer)
        answer.close()
        del answer
        assert gone() is None
    finally:
        gc.enable()


def test_close_response_runs_every_closer_then_finished() -> None:
    response = HttpResponse("x")
    done: list[str] = []

    def failing() -> None:
        done.append("failing")
        raise RuntimeError

    response._resource_closers.extend([failing, lambda: done.append("second")])  # type: ignore[attr-defined]
    compat.close_response(response, lambda: done.append("finished"))
    assert done == ["failing", "second", "finished"]
    assert response.closed


@pytest.mark.usefixtures("conn")
def test_caches_are_closed_when_a_backend_closes_something(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []
    monkeypatch.setattr(apihandler.caches, "close_all", lambda: closed.append(True))
    apihandler.request_ends()
    assert closed == []  # LocMemCache's close does nothing
    with override_settings(CACHES={"default": {"BACKEND": "django.core.cache.backends.memcached.PyMemcacheCache"}}):
        closed.clear()  # changing CACHES closes them too
        apihandler.request_ends()
        assert closed == [True]


def _health_scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": "/health",
        "raw_path": b"/health",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"testserver")],
        "client": ("127.0.0.1", 1),
        "server": ("testserver", 80),
    }


async def _pop_handler_health() -> list[dict[str, Any]]:
    import asyncio

    sent: list[dict[str, Any]] = []
    left = asyncio.Event()
    messages = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await left.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await apihandler.PopHandler()(_health_scope(), receive, send)
    return sent


class NoConnections:
    def all(self, initialized_only: bool = False) -> list[FakeConnection]:
        assert initialized_only
        return []


async def test_pops_do_the_signals_work_without_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """With Django's receivers alone and no connection opened in the
    request's context, the pop handler sends neither signal and hops to no
    thread; the answer is Django's."""
    monkeypatch.setattr(apihandler, "connections", NoConnections())
    hops: list[Any] = []
    monkeypatch.setattr(apihandler, "sync_to_async", lambda fn: hops.append(fn))
    sent = await _pop_handler_health()
    assert sent[0]["status"] == 200
    assert b"".join(m.get("body", b"") for m in sent[1:]) == b'{"status":"ok"}'
    assert hops == []


async def test_pops_check_a_connection_opened_in_their_context(conn: FakeConnection) -> None:
    """A connection initialized in the request's context gets the receivers'
    work as Django does it, on a thread: cleared log, lifetime checked twice."""
    sent = await _pop_handler_health()
    assert sent[0]["status"] == 200
    assert conn.queries_log == []
    assert conn.checks == 2


@pytest.mark.usefixtures("without_close_old_connections")
async def test_pops_send_the_signals_to_another_receiver(seen: list[tuple[str, Any]]) -> None:
    sent = await _pop_handler_health()
    assert sent[0]["status"] == 200
    assert seen == [("started", apihandler.PopHandler), ("finished", apihandler.PopHandler)]

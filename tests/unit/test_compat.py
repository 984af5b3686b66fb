"""The private names of Django, uvicorn, a2wsgi and prometheus_client that
``queenadmin/plumbing/compat.py`` relies on still exist, with the shape relied
on: an upgrade that moves one fails here first, and by name.

Also pinned: the undocumented hooks our subclasses override (their names are
public, but nothing promises them).
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpResponse
from django.test import RequestFactory
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle
from uvicorn.server import Server, ServerState

from queenadmin.plumbing import compat
from queenadmin.server.httpproto import HeaderDeadlineProtocol, OneWriteCycle


def test_django_base_handler_keeps_its_chain_in_the_attributes_compat_sets():
    """``load_middleware`` fills the four attributes ``install_middleware``
    sets, and ``get_response`` runs ``_middleware_chain``."""
    handler = BaseHandler()
    handler.load_middleware()
    for name in ("_view_middleware", "_template_response_middleware", "_exception_middleware"):
        assert isinstance(getattr(handler, name), list), name
    assert callable(handler._middleware_chain)  # type: ignore[attr-defined]

    answer = HttpResponse("from the chain")
    compat.install_middleware(handler, lambda request: answer, view=[], template_response=[], exception=[])
    assert handler.get_response(RequestFactory().get("/")) is answer


def test_django_get_response_runs_the_view_middleware_compat_installs():
    """``_get_response`` resolves the URL, then calls the view hooks from
    the list ``install_middleware`` gave (one answering ends the request)."""
    handler = WSGIHandler()
    answer = HttpResponse("from a view hook")
    compat.install_middleware(
        handler,
        compat.middleware_base(handler, is_async=False),
        view=[lambda request, view, args, kwargs: answer],
        template_response=[],
        exception=[],
    )
    assert handler.get_response(RequestFactory().get("/health")) is answer


def test_django_has_an_async_get_response():
    assert inspect.iscoroutinefunction(compat.middleware_base(ASGIHandler(), is_async=True))
    assert not inspect.iscoroutinefunction(compat.middleware_base(WSGIHandler(), is_async=False))


def test_django_hooks_our_handlers_override_exist():
    assert inspect.signature(BaseHandler.load_middleware).parameters.keys() == {"self", "is_async"}
    assert inspect.signature(BaseHandler.resolve_request).parameters.keys() == {"self", "request"}
    assert inspect.iscoroutinefunction(ASGIHandler.handle)
    assert list(inspect.signature(ASGIHandler.handle).parameters) == ["self", "scope", "receive", "send"]


def test_django_backends_make_every_cursor_in_create_cursor():
    """``pgbackend`` notes a connection's last use there (for plain and
    named cursors alike)."""
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.backends.postgresql.base import DatabaseWrapper

    assert "self.create_cursor(name)" in inspect.getsource(BaseDatabaseWrapper._cursor)
    assert "return self._cursor()" in inspect.getsource(BaseDatabaseWrapper.cursor)
    assert "self._cursor(" in inspect.getsource(DatabaseWrapper.chunked_cursor)


class _Transport:
    """Records writes; enough of a transport for uvicorn's protocol."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        self.writes.append(b"".join(chunks))

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 5000), "sockname": ("127.0.0.1", 8000)}.get(name, default)


async def _serve_one(request: bytes) -> tuple[HttpToolsProtocol, _Transport, dict[str, Any]]:
    seen: dict[str, Any] = {}

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen["body_complete"] = compat.body_complete(receive)
        seen["message"] = await receive()
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    config = Config(app=app, http=HeaderDeadlineProtocol, lifespan="off", log_config=None)
    protocol = HeaderDeadlineProtocol(config=config, server_state=ServerState(), app_state={})
    transport = _Transport()
    protocol.connection_made(transport)  # type: ignore[arg-type]
    protocol.data_received(request)
    seen["cycle_class"] = type(protocol.cycle)
    for _ in range(20):
        await asyncio.sleep(0)
    protocol.connection_lost(None)
    return protocol, transport, seen


async def test_uvicorn_cycles_become_one_write_cycles_before_they_run():
    """The cycle ``on_headers_complete`` makes is a ``RequestResponseCycle``
    whose task has not run yet: changed to ``OneWriteCycle``, its answer's
    head and body go out in one write."""
    _, transport, seen = await _serve_one(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    assert seen["cycle_class"] is OneWriteCycle
    assert len(transport.writes) == 1
    assert transport.writes[0].startswith(b"HTTP/1.1 200 OK\r\n")
    assert transport.writes[0].endswith(b"\r\n\r\nok")


async def test_uvicorn_receive_is_a_bound_method_of_the_cycle_with_more_body():
    """A body in the same packet as the headers is complete at the app's start."""
    _, _, seen = await _serve_one(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
    assert seen["body_complete"] is True
    assert seen["message"] == {"type": "http.request", "body": b"hi", "more_body": False}


async def test_uvicorn_receive_of_a_body_still_arriving_is_not_complete():
    _, _, seen = await _serve_one(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nhi")
    assert seen["body_complete"] is False


def test_uvicorn_cycle_class_is_set_only_on_uvicorns_own_cycles():
    assert "more_body" in inspect.getsource(RequestResponseCycle.__init__)
    compat.use_cycle_class(None, OneWriteCycle)  # no cycle yet: nothing to do
    assert OneWriteCycle.__init__ is RequestResponseCycle.__init__  # no state of its own


def test_uvicorn_protocol_hooks_httpproto_overrides_exist():
    for name in (
        "connection_made",
        "connection_lost",
        "on_message_begin",
        "on_headers_complete",
        "on_response_complete",
    ):
        assert callable(getattr(HttpToolsProtocol, name)), name
    assert inspect.iscoroutinefunction(RequestResponseCycle.send)


def test_uvicorn_server_startup_is_where_serve_announces():
    """``serve`` logs "serving on" after ``Server.startup``, from ``servers``."""
    assert inspect.iscoroutinefunction(Server.startup)
    assert list(inspect.signature(Server.startup).parameters) == ["self", "sockets"]
    assert "self.servers = [server]" in inspect.getsource(Server.startup)
    assert "self.started = True" in inspect.getsource(Server.startup)


def test_prometheus_histogram_children_count_what_compat_adds():
    from prometheus_client import CollectorRegistry, Histogram

    registry = CollectorRegistry()
    histogram = Histogram("compat_seconds", "A pin.", ["route"], buckets=(0.1, 1.0), registry=registry)
    child = histogram.labels("kv")
    compat.histogram_add(child, 1, 3)  # three observations in (0.1, 1.0]
    compat.histogram_add_sum(child, 1.5)
    child.observe(0.05)
    samples = {
        (s.name, s.labels.get("le")): s.value
        for metric in registry.collect()
        for s in metric.samples
        if s.labels.get("route") == "kv"
    }
    assert samples[("compat_seconds_bucket", "0.1")] == 1
    assert samples[("compat_seconds_bucket", "1.0")] == 4
    assert samples[("compat_seconds_bucket", "+Inf")] == 4
    assert samples[("compat_seconds_count", None)] == 4
    assert samples[("compat_seconds_sum", None)] == pytest.approx(1.55)


def test_django_signals_keep_their_receivers_as_compat_reads_them():
    """``only_receivers`` reads ``Signal.receivers``' entries and
    ``_dead_receivers``; a receiver gone (weakly held) is not counted."""
    from django.dispatch import Signal

    signal = Signal()

    def first(**kwargs: Any) -> None:
        pass

    def second(**kwargs: Any) -> None:
        pass

    assert compat.only_receivers(signal, frozenset())
    signal.connect(first)
    assert signal._dead_receivers is False  # type: ignore[attr-defined]
    assert compat.only_receivers(signal, frozenset({first}))
    assert not compat.only_receivers(signal, frozenset({first, second}))
    signal.connect(second, sender=HttpResponse)
    assert not compat.only_receivers(signal, frozenset({first, second}))


def test_django_response_close_is_what_close_response_replaces():
    source = inspect.getsource(HttpResponse.close)
    assert "self._resource_closers" in source
    assert "signals.request_finished.send(sender=self._handler_class)" in source

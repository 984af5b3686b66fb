"""Every private name of another project that queenadmin relies on.

Each is used here only, behind a small function named for what it does, and
``tests/unit/test_compat.py`` asserts that each still exists with the shape
relied on: after an upgrade that moves one, that test fails first, and by
name, instead of a request failing in some other test (or in production).

Django
    ``BaseHandler._get_response`` / ``_get_response_async`` and the
    attributes ``load_middleware`` fills (``_view_middleware``,
    ``_template_response_middleware``, ``_exception_middleware``,
    ``_middleware_chain``): ``server.handlers.load_chain`` builds the API's
    and the pops' chains from a list of our choosing (Django's own
    ``load_middleware`` reads only ``settings.MIDDLEWARE``). Used by
    ``middleware_base`` and ``install_middleware``.

    ``Signal.receivers`` (entries ``((receiver id, sender id), receiver or
    weak reference, is_async)``) and ``_dead_receivers``: the API's handler
    does the request signals' work itself while only Django's own receivers
    are connected (``only_receivers``). ``HttpResponseBase._resource_closers``
    and its ``close``, which sends ``request_finished``: ``close_response``
    is that ``close`` with the signal's work given.

uvicorn
    Its httptools protocol makes every request cycle a
    ``RequestResponseCycle`` (a module global, no setting chooses the
    class); ``server.httpproto.OneWriteCycle`` is that class with one
    method changed, so ``use_cycle_class`` changes a new cycle's class
    before its task runs. ``RequestResponseCycle.more_body`` (public, but
    reached through the ``__self__`` of the ``receive`` uvicorn passes)
    says whether a request's body is all in, so the body is read without a
    timer (``body_complete``).

prometheus_client
    A histogram child's ``_buckets`` and ``_sum``: ``metrics`` adds a
    batch of observations at once (``observe`` costs a locked file write
    per call in multiprocess mode); ``histogram_add``.

Replaced by public names (so not here): uvicorn's ``_start_asgi_task``
(the cycle's class is changed in ``on_headers_complete``, which is the
parser's public callback), ``Server._log_started_message`` (``serve``
announces after ``Server.startup``), Django's ``DatabaseWrapper._cursor``
(``pgbackend`` overrides ``create_cursor``, the backend API).

Not underscored, but undocumented hooks that subclasses override (pinned by
the same test): Django's ``BaseHandler.load_middleware`` and
``resolve_request``, ``ASGIHandler.handle``; uvicorn's
``HttpToolsProtocol`` parser callbacks and ``RequestResponseCycle.send``.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable, Collection
from typing import Any

from django.core.handlers.base import BaseHandler
from django.dispatch import Signal
from django.dispatch.dispatcher import NONE_ID
from django.http.response import HttpResponseBase
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

#: A middleware's ``get_response``: sync or async, request to response.
GetResponse = Callable[[Any], Any]


def middleware_base(handler: BaseHandler, *, is_async: bool) -> GetResponse:
    """The innermost step of ``handler``'s chain: resolve the URL, run the
    view middleware and the view (``BaseHandler._get_response[_async]``)."""
    return handler._get_response_async if is_async else handler._get_response  # type: ignore[attr-defined,no-any-return]


def install_middleware(
    handler: BaseHandler,
    chain: GetResponse,
    *,
    view: list[Any],
    template_response: list[Any],
    exception: list[Any],
) -> None:
    """Give ``handler`` the chain and hooks ``load_middleware`` would set.

    ``_middleware_chain`` last: Django reads it as the sign that loading
    finished.
    """
    handler._view_middleware = view  # type: ignore[attr-defined]
    handler._template_response_middleware = template_response  # type: ignore[attr-defined]
    handler._exception_middleware = exception  # type: ignore[attr-defined]
    handler._middleware_chain = chain  # type: ignore[attr-defined]


def only_receivers(signal: Signal, functions: Collection[Any]) -> bool:
    """Whether ``signal``'s receivers are ``functions``, each connected
    (once) for every sender, and nothing else."""
    receivers = signal.receivers
    if len(receivers) != len(functions) or signal._dead_receivers:  # type: ignore[attr-defined]
        return False
    for (_, sender_key), receiver, _is_async in receivers:
        if isinstance(receiver, weakref.ReferenceType):
            receiver = receiver()
        if sender_key != NONE_ID or receiver not in functions:
            return False
    return True  # Django connects a receiver at most once per sender


def close_response(response: HttpResponseBase, finished: Callable[[], None]) -> None:
    """``response.close()`` with ``finished()`` in place of sending
    ``request_finished``: the request's resources closed, then ``finished``."""
    for closer in response._resource_closers:  # type: ignore[attr-defined]
        with contextlib.suppress(Exception):  # as Django's close: every closer runs
            closer()
    response._resource_closers.clear()  # type: ignore[attr-defined]
    response.closed = True
    # The instance's own ``close`` (a partial holding ``response``) is a
    # reference cycle: undone, so the answer is freed at once, not by the GC.
    response.__dict__.pop("close", None)
    finished()


def use_cycle_class(cycle: RequestResponseCycle | None, cls: type[RequestResponseCycle]) -> None:
    """Make ``cycle`` (uvicorn's, just made) an instance of ``cls``.

    ``cls`` must subclass ``RequestResponseCycle`` and add no state of its
    own that ``__init__`` would set (class attributes only).
    """
    if cycle is not None and type(cycle) is RequestResponseCycle:
        cycle.__class__ = cls


def body_complete(receive: Any) -> bool:
    """Whether ``receive`` is uvicorn's and its request is wholly read.

    Its first ``receive()`` then hands over the whole body without waiting:
    the usual case, a small body in the same packets as the headers.
    """
    cycle = getattr(receive, "__self__", None)
    return isinstance(cycle, RequestResponseCycle) and not cycle.more_body


def histogram_add(child: Any, bucket: int, count: float) -> None:
    """Count ``count`` observations in ``bucket`` (an index of the
    histogram's bounds) of a prometheus_client histogram's labelled child."""
    child._buckets[bucket].inc(count)


def histogram_add_sum(child: Any, seconds: float) -> None:
    """Add ``seconds`` to a histogram child's sum of observations."""
    child._sum.inc(seconds)

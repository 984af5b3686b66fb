"""Run Django's WSGI handler under ASGI with one thread hop per request.

``a2wsgi.WSGIMiddleware`` reads the body and sends the response from the
worker thread, blocking on the event loop for each step: about five
thread-to-loop round trips per request, each a GIL hand-off, which on this
2-core box cost more CPU than Django itself (bench/README.md). For API calls
we can do better: the body is small and the answer is a plain
``HttpResponse``, so the loop reads the whole body first, one pool thread
runs Django and hands back status, headers and content, and the loop sends
them. Streaming responses still go out chunk by chunk from the thread.

Every body is read here, on the event loop, before any thread is involved
(issue 13: eight clients sending a byte every 5 s used to hold every pool
thread, so ``/health`` and the API stopped answering):

- the API's write routes take bodies up to ``MAX_BODY_BYTES``; every other
  route (login, dashboard, static) up to ``SMALL_BODY_BYTES`` (1 MiB); a declared
  length over the limit is refused (413) before a byte is read;
- after ``BODY_GRACE_SECONDS`` the body must keep arriving at an average of
  ``BODY_MIN_RATE`` bytes a second, else 408;
- a chunked body (no Content-Length) is read the same way and handed to
  Django with its length, so it is no longer seen as empty.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import io
import os
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from queenadmin.conf import settings
from queenadmin.plumbing import compat

Message = dict[str, Any]
T = TypeVar("T")


# WSGI threads per process: QUEENADMIN_HTTP_THREADS, 4 by default
# (queenadmin/conf.py). Every thread that runs Python wants the GIL: with 8
# threads, one process made ~10 voluntary context switches per single KV put
# in its worker threads (most of them GIL hand-offs) and 59 futex calls, and
# served 1,554 puts/s at 16 connections against 1,907 with 4 threads and
# 1,793 with 2 (measured 2026-12-01). A transaction (several
# statements, so more time waiting on PostgreSQL) measured the same with 4 as
# with 8. Raise it when PostgreSQL is far away: each thread waits out its
# round trips.
def http_threads() -> int:
    """WSGI threads per process: ``QUEENADMIN_HTTP_THREADS`` (default 4)."""
    return settings.HTTP_THREADS


#: The body limit of every route but the API's writes (login, dashboard,
#: static files; ``MAX_BODY_BYTES`` for those). Internal, not a setting
#: (docs/settings.md, "Internal constants").
SMALL_BODY_BYTES = 1024 * 1024

#: Methods whose body the API's write routes read.
_WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class BodyRefused(Exception):
    """The body is too large or too slow: answer ``status`` and close."""

    def __init__(self, status: int, text: str) -> None:
        super().__init__(text)
        self.status = status
        self.text = text


def _declared_length(scope: dict[str, Any]) -> int | None:
    """The Content-Length header as an int; None when absent or chunked."""
    length = None
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                length = int(value)
            except ValueError:
                return None
        elif name == b"transfer-encoding":
            return None
    return length


def body_limit(scope: dict[str, Any]) -> int:
    """The largest body a request may send: large only on API writes."""
    if scope.get("method") in _WRITE_METHODS and scope["path"].startswith(("/api/", "/streams/")):
        return settings.MAX_BODY_BYTES
    return SMALL_BODY_BYTES


async def read_body(scope: dict[str, Any], receive: Any) -> bytes | None:
    """The whole request body, or None when the client went away.

    Raises ``BodyRefused`` for a body over ``body_limit`` (413) or one that
    falls behind ``BODY_MIN_RATE`` after ``BODY_GRACE_SECONDS`` (408).
    """
    limit = body_limit(scope)
    declared = _declared_length(scope)
    if declared is not None and declared > limit:
        raise BodyRefused(413, "payload too large\n")
    chunks: list[bytes] = []
    size = 0
    more = True
    arrived = compat.body_complete(receive)
    # The deadline's clock and settings only where there is a wait: finding
    # the running loop is a getpid() system call each time.
    deadline: tuple[asyncio.AbstractEventLoop, float, float, float] | None = None
    while more:
        if arrived:  # no wait, so no deadline to set and cancel
            message = await receive()
        else:
            if deadline is None:
                loop = asyncio.get_running_loop()
                deadline = (loop, loop.time(), settings.BODY_GRACE_SECONDS, settings.BODY_MIN_RATE)
            loop, started, grace, rate = deadline
            remaining = started + grace + size / rate - loop.time()
            try:
                async with asyncio.timeout(max(remaining, 0.0)):
                    message = await receive()
            except TimeoutError:
                raise BodyRefused(408, "request body too slow\n") from None
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyRefused(413, "payload too large\n")
            chunks.append(chunk)
        more = message.get("more_body", False)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


#: The WSGI name of each request header name seen (``HTTP_X_A`` of
#: ``x-a``): a client sends the same few on every call. At most
#: ``_HEADER_NAMES_KEPT`` are kept, so made-up names cannot grow it.
_header_names: dict[bytes, str] = {b"content-length": "CONTENT_LENGTH", b"content-type": "CONTENT_TYPE"}
_HEADER_NAMES_KEPT = 256


def _header_name(name: bytes) -> str:
    found = _header_names.get(name)
    if found is None:
        found = f"HTTP_{name.decode('latin1')}".upper().replace("-", "_")
        if len(_header_names) < _HEADER_NAMES_KEPT:
            _header_names[name] = found
    return found


def wsgi_environ(scope: dict[str, Any], body: Any) -> dict[str, Any]:
    """The PEP 3333 environ of an HTTP ``scope`` with ``body`` as its input.

    What ``a2wsgi.wsgi.build_environ`` makes (``tests/unit/test_wsgi_environ.py``
    compares them), with each header's WSGI name made once per process
    instead of per request: building it was ~9 us of a lone KV put's ~700
    of server CPU. One difference: a2wsgi lets a ``SCRIPT_NAME`` in the
    process's environment override the scope's; here the prefix is the
    scope's ``root_path`` only, since settings.py is the one reader of the
    environment (``tests/unit/test_settings_list.py``).
    """
    script_name = scope.get("root_path", "").encode("utf8").decode("latin1")
    path_info = scope["path"].encode("utf8").decode("latin1")
    if path_info.startswith(script_name):
        path_info = path_info[len(script_name) :]
    server_addr, server_port = scope.get("server") or ("localhost", 80)
    environ: dict[str, Any] = {
        "asgi.scope": scope,
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": script_name,
        "PATH_INFO": path_info,
        "QUERY_STRING": scope["query_string"].decode("ascii"),
        "SERVER_PROTOCOL": f"HTTP/{scope['http_version']}",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": body,
        "wsgi.errors": sys.stdout,
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
        "SERVER_NAME": server_addr,
        "SERVER_PORT": str(server_port or 0),
    }
    client = scope.get("client")
    if client is not None:
        environ["REMOTE_ADDR"], port = client
        environ["REMOTE_PORT"] = str(port)
    for name, raw in scope.get("headers", ()):
        key = _header_name(name)
        value = raw.decode("latin1")
        # A repeated header is one entry, its values joined by commas.
        environ[key] = environ[key] + "," + value if key in environ else value
    return environ


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():
        return
    if error is None:
        future.set_result(result)
    else:
        future.set_exception(error)


#: This process's id, kept up to date across ``fork``: ``os.getpid()`` is a
#: system call, which ``ThreadHop.run`` made per job.
_this_pid = os.getpid()


def _forked() -> None:
    global _this_pid
    _this_pid = os.getpid()


os.register_at_fork(after_in_child=_forked)


class _Slot:
    """One thread of a hop: it sleeps on ``wake`` until a job is handed to it."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: tuple[Any, ...] | None = None
        #: Held while the thread has nothing to do; released to hand it ``job``.
        self.wake = threading.Lock()
        self.wake.acquire()


class _Crew:
    """One process's threads of a hop: those idle, and the jobs none took yet."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        #: The idle threads, the most recently idle last.
        self.idle: list[_Slot] = []
        self.backlog: collections.deque[tuple[Any, ...]] = collections.deque()


class ThreadHop:
    """A fixed set of threads that run jobs for the event loop.

    ``loop.run_in_executor`` goes through a ``concurrent.futures.Future``
    chained to an asyncio one (two futures, their callbacks and a state
    copy per call). Here a job is handed to a thread with its asyncio
    future and the thread settles that future with one
    ``call_soon_threadsafe``.

    A job wakes exactly one thread, the one idle most recently (its memory
    still in the CPU's caches); one that finds every thread busy waits in
    the backlog for the first to finish. With a ``queue.SimpleQueue`` that
    all the threads waited on, each job woke a second, idle thread that
    found nothing and slept again, and the two fought the loop for the GIL:
    12 context switches per lone KV put in the serving process (one client,
    ``perf stat``), where this makes 4 (bench/README.md, "Where the time
    goes").

    The threads start at the first job of each process (a forked child
    starts its own). They are daemons: uvicorn waits for the requests in
    flight, up to its graceful-shutdown time, before the process exits; a
    job still running then ends with the process, its database transaction
    rolled back.
    """

    def __init__(self, threads: int, name: str, *, skip_cancelled: bool = False) -> None:
        self.size = threads
        self.name = name
        #: A job whose awaiting task was cancelled before a thread took it
        #: is dropped (as ``run_in_executor`` drops it), not run.
        self.skip_cancelled = skip_cancelled
        self._crew = _Crew()
        #: The process whose threads ``_crew`` holds; 0 before the first job.
        self._pid = 0
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: Any, loop: asyncio.AbstractEventLoop | None = None) -> T:
        """Await ``fn(*args)`` run on one of the threads, in a copy of this
        context; ``loop``: the running loop, when the caller has it at hand."""
        if self._pid != _this_pid:
            self._start()
        if loop is None:
            loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        job = (loop, future, contextvars.copy_context(), fn, args)
        crew = self._crew
        with crew.mutex:
            slot = crew.idle.pop() if crew.idle else None
            if slot is None:
                crew.backlog.append(job)
        if slot is not None:
            slot.job = job
            slot.wake.release()
        return await future

    def _start(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                return
            self._crew = crew = _Crew()  # a parent's crew has no threads here
            for n in range(self.size):
                threading.Thread(
                    target=self._work, args=(crew, _Slot(), self.skip_cancelled), name=f"{self.name}_{n}", daemon=True
                ).start()
            self._pid = os.getpid()

    @staticmethod
    def _work(crew: _Crew, slot: _Slot, skip_cancelled: bool) -> None:
        while True:
            with crew.mutex:
                job = crew.backlog.popleft() if crew.backlog else None
                if job is None:
                    crew.idle.append(slot)
            if job is None:
                slot.wake.acquire()
                job, slot.job = slot.job, None
            assert job is not None
            loop, future, context, fn, args = job
            del job
            # Read off the loop: a cancel landing just after this is the
            # same as one landing while the job runs.
            if skip_cancelled and future.cancelled():
                del loop, future, context, fn, args
                continue
            try:
                result, error = context.run(fn, *args), None
            except BaseException as exc:  # handed to the awaiting task
                result, error = None, exc
            # Freed before the loop wakes, so the thread holds the GIL as
            # little as it can once the loop wants it back.
            del context, fn, args
            # RuntimeError: the loop closed meanwhile, nobody awaits.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_settle, future, result, error)
            del loop, future, result, error


class BufferedWSGI:
    """An ASGI app for plain HTTP that runs ``wsgi_app`` on ``threads``."""

    def __init__(self, wsgi_app: Any, threads: ThreadHop) -> None:
        self.wsgi_app = wsgi_app
        self.threads = threads

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body = await read_body(scope, receive)
        except BodyRefused as refusal:
            text = refusal.text.encode()
            headers = [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(text)).encode()),
                (b"connection", b"close"),
            ]
            await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
            await send({"type": "http.response.body", "body": text})
            return
        if body is None:
            return
        loop = asyncio.get_running_loop()
        # BytesIO shares the bytes and Django's read of the whole stream
        # returns that same object: the body is held once.
        environ = wsgi_environ(scope, io.BytesIO(body))
        environ["CONTENT_LENGTH"] = str(len(body))
        status, headers, chunks = await self.threads.run(self._run, environ, loop, send, loop=loop)
        if status is None:  # a streaming answer, already sent from the thread
            return
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": b"".join(chunks)})

    def _run(
        self, environ: dict[str, Any], loop: asyncio.AbstractEventLoop, send: Any
    ) -> tuple[int | None, list[tuple[bytes, bytes]], list[bytes]]:
        """In a pool thread: run Django; buffer a plain answer, stream the rest."""
        started: list[Any] = []
        written: list[bytes] = []

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if exc_info is not None and started:
                raise exc_info[1].with_traceback(exc_info[2])
            started[:] = [
                int(status.split(" ", 1)[0]),
                [(n.strip().encode("latin1").lower(), v.strip().encode("latin1")) for n, v in headers],
            ]
            return written.append

        result = self.wsgi_app(environ, start_response)
        try:
            if not getattr(result, "streaming", False):
                written.extend(result)
                return started[0], started[1], written

            # Streaming (files, server-sent events): one hop per chunk.
            def push(message: Message) -> None:
                asyncio.run_coroutine_threadsafe(send(message), loop).result()

            push({"type": "http.response.start", "status": started[0], "headers": started[1]})
            for chunk in [*written, *result]:
                if chunk:
                    push({"type": "http.response.body", "body": chunk, "more_body": True})
            push({"type": "http.response.body", "body": b""})
            return None, [], []
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()

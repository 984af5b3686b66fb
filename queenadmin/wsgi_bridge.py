"""Run Django's WSGI handler under ASGI with one thread hop per request.

``a2wsgi.WSGIMiddleware`` reads the body and sends the response from the
worker thread, blocking on the event loop for each step: about five
thread-to-loop round trips per request, each a GIL hand-off, which on this
2-core box cost more CPU than Django itself (bench/README.md). For API calls
we can do better: the body is small and the answer is a plain
``HttpResponse``, so the loop reads the whole body first, one pool thread
runs Django and hands back status, headers and content, and the loop sends
them. Streaming responses still go out chunk by chunk from the thread.

Requests this bridge does not take (declared body over ``BUFFER_LIMIT`` or
no declared length with a body coming) go to the a2wsgi path unchanged,
so large uploads are still read lazily and refused on their declared size.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import io
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from a2wsgi.wsgi import build_environ

#: Largest declared body read into memory before Django runs.
BUFFER_LIMIT = 1024 * 1024

Message = dict[str, Any]


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
    if length is None and scope.get("method") in ("GET", "HEAD", "DELETE", "OPTIONS"):
        return 0
    return length


class BufferedWSGI:
    """An ASGI app for plain HTTP that runs ``wsgi_app`` in ``executor``."""

    def __init__(self, wsgi_app: Any, executor: ThreadPoolExecutor, fallback: Any) -> None:
        self.wsgi_app = wsgi_app
        self.executor = executor
        self.fallback = fallback

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        length = _declared_length(scope)
        if length is None or length > BUFFER_LIMIT:
            await self.fallback(scope, receive, send)
            return
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
        loop = asyncio.get_running_loop()
        environ: dict[str, Any] = dict(build_environ(scope, io.BytesIO(bytes(body))))  # type: ignore[arg-type]
        job = functools.partial(contextvars.copy_context().run, self._run, environ, loop, send)
        status, headers, chunks = await loop.run_in_executor(self.executor, job)
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

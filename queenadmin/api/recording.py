"""A test hook: record every /api answer as one JSON line.

``QUEENADMIN_RECORD_ANSWERS=<dir>`` in the environment makes ``settings.py``
append :class:`RecordAnswersMiddleware` to ``MIDDLEWARE``; unset (always, in
production) the middleware is not installed at all, so the request path
pays nothing. The API test suite sets it (``tests/api/conftest.py``) so that
in-process test clients and every ``manage.py serve`` the suite starts
write what they answered, and ``tests/api/test_contract.py`` checks each
answer against the OpenAPI document the server publishes.

Each process appends to ``<dir>/answers-<pid>.jsonl`` lines of
``{"method", "route", "path", "status", "contentType", "body"}``, where
``route`` is the OpenAPI path template (``/api/v1/kv/{ns}/{key}``).
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from django.http import HttpRequest
from django.http.response import HttpResponseBase

from queenadmin.plumbing.middleware import DualModeMiddleware

#: The environment variable that turns recording on and names the folder.
ENV = "QUEENADMIN_RECORD_ANSWERS"
#: Answers to paths outside this prefix are not recorded.
PREFIX = "/api/"

_CONVERTER = re.compile(r"<(?:\w+:)?(\w+)>")


def openapi_path(route: str) -> str:
    """``api/v1/kv/<ns>/<path:key>`` (a Django route) as ``/api/v1/kv/{ns}/{key}``."""
    return "/" + _CONVERTER.sub(r"{\1}", route)


class _Recorder:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.pid = 0
        self.fd = -1

    def write(self, record: dict[str, Any]) -> None:
        # ASCII: a path may hold U+2028 or U+0085, which the reader's
        # splitlines() would take for line ends.
        line = (json.dumps(record) + "\n").encode()
        with self.lock:
            if self.pid != os.getpid():
                self.pid = os.getpid()
                self.folder.mkdir(parents=True, exist_ok=True)
                path = self.folder / f"answers-{self.pid}.jsonl"
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            # One write per line: a reader never sees half a line.
            os.write(self.fd, line)


def _record_of(request: HttpRequest, response: HttpResponseBase) -> dict[str, Any] | None:
    if not request.path.startswith(PREFIX):
        return None
    match = request.resolver_match
    body = b"" if response.streaming else response.content  # type: ignore[attr-defined]
    return {
        "method": request.method,
        "route": openapi_path(match.route) if match is not None else None,
        "path": request.path,
        "status": response.status_code,
        "contentType": response.get("Content-Type"),
        "body": body.decode("utf-8", errors="replace"),
    }


class RecordAnswersMiddleware(DualModeMiddleware):
    """Append every /api answer to the recording folder (a test hook).

    In an async chain the write is a small blocking one on the event loop:
    fine for a test hook.
    """

    def __init__(
        self,
        get_response: Callable[[HttpRequest], HttpResponseBase] | Callable[[HttpRequest], Awaitable[HttpResponseBase]],
    ) -> None:
        super().__init__(get_response)
        self.recorder = _Recorder(Path(os.environ[ENV]))

    def after(self, request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
        assert isinstance(response, HttpResponseBase)
        self._record(request, response)
        return response

    def _record(self, request: HttpRequest, response: HttpResponseBase) -> None:
        record = _record_of(request, response)
        if record is not None:
            self.recorder.write(record)

"""Real-browser tests: Playwright drives Debian's chromium against ``serve``.

``playwright install`` cannot download here, so the browser is
``/usr/bin/chromium`` (``.ci/install-system`` installs it with apt). With
``QA_SHOTS=1`` every test saves screenshots under ``test-artifacts/browser/``
(gitignored); every page's HTML and websocket frame is kept for the secrets
grep.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer, run_server, stop_process

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = ROOT / "test-artifacts" / "browser"
#: QA_SHOTS=1 saves the screenshots the tests name (``shot``). Off by
#: default: they check nothing, and each full-page one is a render and a PNG
#: of chromium's CPU (about 50 in a run of this folder).
SHOTS = os.environ.get("QA_SHOTS") == "1"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

pytestmark = pytest.mark.live

#: An ``expect`` waits as long as a page's actions do (``set_default_timeout``
#: below), not Playwright's 5 s: on a slow hour of this shared machine
#: Swagger UI took longer than 5 s to draw the API docs (CI legs at
#: 1,276 s). A check that holds returns at once; only a failing one waits.
EXPECT_TIMEOUT_MS = 15_000


@pytest.fixture(scope="session", autouse=True)
def _expect_waits_as_long_as_actions() -> None:
    from playwright.sync_api import expect

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)


USERS = """
from django.contrib.auth.models import Group, User
from django.db import transaction
from queenadmin.domain.kv.store import store
for name, group in (("otto", "queenadmin operators"), ("vera", "queenadmin viewers")):
    user = User.objects.create_user(name, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=group))
# Tokens above 12,000: a raw token in a page or frame is then findable.
# Drawn from the store-wide counter at once, not by 12,000 writes through
# the API (47 requests, seconds of the server's CPU).
with transaction.atomic():
    store().draw_versions(12_000)
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not CHROMIUM.exists():
        skip = pytest.mark.skip(reason="needs /usr/bin/chromium (.ci/install-system installs it)")
        for item in items:
            if "tests/browser" in str(item.fspath):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _async_unsafe_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Playwright's sync API runs an event loop in this thread; Django's ORM
    then needs this to be used here (only in this folder)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def start_dashboard_server() -> contextlib.AbstractContextManager[LiveServer]:
    return run_server(extra_env={"QUEENADMIN_ENVIRONMENT_NAME": "staging"})


def add_users(server: LiveServer) -> None:
    server.manage("shell", "-c", USERS)
    with api(server) as client:
        # The counter moved: the next write's version is past 12,000.
        answer = client.put("/api/v1/kv/grep-pad/k0", json={"value": 1, "forever": True})
        assert answer.status_code == 200, answer.text
        assert answer.json()["version"] > 12_000, answer.text


@pytest.fixture(scope="package")
def dash() -> Iterator[LiveServer]:
    """A live ``serve`` with an operator (otto) and a viewer (vera), shared
    by this folder's tests (each uses names of its own)."""
    with start_dashboard_server() as server:
        add_users(server)
        yield server


#: In every page, before its own scripts: each Content-Security-Policy
#: violation goes to the console, where ``CspWatch`` collects it (chromium's
#: own "Refused to ..." lines are collected too).
CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (e) => {
  console.error(`CSP violation: ${e.disposition} ${e.effectiveDirective} refused ${e.blockedURI || "(inline)"}`
    + ` in ${e.documentURI} at ${e.sourceFile}:${e.lineNumber} ${JSON.stringify(e.sample)}`);
});
"""


class CspWatch:
    """The folder's chromium, whose every context reports CSP violations to
    ``violations`` (a test fails if any is left at its end: ``_no_csp_violations``)."""

    def __init__(self, chromium: Any) -> None:
        self.chromium = chromium
        self.violations: list[str] = []

    def new_context(self, **kwargs: Any) -> Any:
        context = self.chromium.new_context(**kwargs)
        context.add_init_script(script=CSP_LISTENER)

        def on_console(message: Any) -> None:
            text = message.text
            if text.startswith("CSP violation:") or "Content Security Policy" in text:
                self.violations.append(f"{message.page.url if message.page else '?'}: {text}")

        context.on("console", on_console)
        return context

    def __getattr__(self, name: str) -> Any:
        return getattr(self.chromium, name)


@pytest.fixture(scope="package")
def browser() -> Iterator[CspWatch]:
    """One chromium for this folder's tests, stopped when they end: Playwright's
    sync API keeps an event loop running in the main thread while it is up,
    which the asyncio tests and Django's async-safety check after this folder
    would trip over."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield CspWatch(chromium)
        chromium.close()


@pytest.fixture(autouse=True)
def _no_csp_violations(request: pytest.FixtureRequest) -> Iterator[None]:
    """No page a test shows breaks the Content-Security-Policy (server/csp.py)."""
    yield
    if "browser" not in request.fixturenames:
        return
    watch: CspWatch = request.getfixturevalue("browser")
    found, watch.violations[:] = list(watch.violations), []
    assert not found, "Content-Security-Policy violations:\n" + "\n".join(found)


class Seen:
    """Every page's HTML and every websocket frame a test saw."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def watch(self, page: Any) -> None:
        def on_socket(socket: Any) -> None:
            socket.on("framereceived", lambda payload: self.texts.append(str(payload)))
            socket.on("framesent", lambda payload: self.texts.append(str(payload)))

        page.on("websocket", on_socket)

    def keep(self, page: Any) -> None:
        self.texts.append(page.content())

    def assert_free_of(self, *secrets: str) -> None:
        assert self.texts, "nothing was seen"
        for secret in secrets:
            for text in self.texts:
                assert secret not in text, f"{secret!r} reached the browser"


@pytest.fixture
def seen() -> Seen:
    return Seen()


#: (server, user) -> the cookies of a context that logged in there through
#: the form, for the later contexts of the same user on the same server.
_signed_in: dict[tuple[str, str, str], Any] = {}


@pytest.fixture
def login(browser: Any, seen: Seen) -> Iterator[Callable[..., Any]]:
    """``login(server, "otto")``: a logged-in page at 1280x800, on the overview.

    A user's first login on a server goes through the form; later ones start
    a new context with that session's cookies (the production hasher costs
    about 0.5 s of the server's CPU a password check).
    """
    contexts: list[Any] = []

    def make(server: LiveServer, user: str) -> Any:
        # The log's folder is the server's own: a port may be used again.
        key = (server.url, str(server.log_path), user)
        state = _signed_in.get(key)
        context = browser.new_context(
            viewport={"width": 1280, "height": 800}, timezone_id="Europe/Paris", storage_state=state
        )
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(EXPECT_TIMEOUT_MS)
        seen.watch(page)
        if state is not None:
            page.goto(f"{server.url}/")
            page.wait_for_url(f"{server.url}/")
            return page
        page.goto(f"{server.url}/login/")
        shot(page, "login")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", "pw")
        page.click("button[type=submit]")
        page.wait_for_url(f"{server.url}/")
        _signed_in[key] = context.storage_state()
        return page

    yield make
    for context in contexts:
        context.close()


def shot(page: Any, name: str) -> None:
    if not SHOTS:
        return
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def api(server: LiveServer) -> httpx.Client:
    return httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {server.token}"}, timeout=10)


@contextlib.contextmanager
def restarted(server: LiveServer) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``serve`` again on the same port and database (after a stop)."""
    port = server.url.rsplit(":", 1)[1]
    with server.log_path.open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--port", port, "--workers", "1"],
            cwd=ROOT,
            env=server.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{server.url}/health", timeout=1).status_code == 200:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("serve did not come back:\n" + server.log())
            time.sleep(0.1)
        yield process
    finally:
        stop_process(process)

"""The API suite records every answer for the contract check.

Collecting this folder points ``QUEENADMIN_RECORD_ANSWERS`` at a fresh
folder (queenadmin/api/recording.py), so every ``manage.py serve`` started
from here on inherits it, and adds the recording middleware to the
in-process test clients. ``test_contract.py`` runs last and checks each
recorded answer against the published OpenAPI document.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.test import override_settings

from queenadmin.api import recording

CONTRACT_FILE = "test_contract.py"
MIDDLEWARE = "queenadmin.api.recording.RecordAnswersMiddleware"


@dataclass
class Contract:
    """What the session recorded and what the contract check found."""

    folder: Path
    #: Node ids of the API tests collected (the contract check aside).
    api_tests: set[str] = field(default_factory=set)
    #: API tests (other than the contract check) whose body ran (not skipped).
    api_tests_run: int = 0
    #: (method, route, status) -> answers validated.
    checked: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    #: (method, path, status) -> answers outside the published API.
    outside: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    failed: bool = False


# Set at import, before any test starts a server, so every server inherits
# it; a folder of our own, never one an earlier run left behind.
CONTRACT = Contract(Path(tempfile.mkdtemp(prefix="qa-answers-")))
os.environ[recording.ENV] = str(CONTRACT.folder)


@pytest.fixture(scope="session", autouse=True)
def _record_answers() -> Iterator[None]:
    """In-process test clients go through the recording middleware too."""
    if MIDDLEWARE in settings.MIDDLEWARE:
        yield
        return
    with override_settings(MIDDLEWARE=[*settings.MIDDLEWARE, MIDDLEWARE]):
        yield


@pytest.fixture
def contract() -> Contract:
    return CONTRACT


def _here(item: pytest.Item) -> bool:
    return item.path.parent == Path(__file__).parent


def _is_contract(item: pytest.Item) -> bool:
    return _here(item) and item.path.name == CONTRACT_FILE


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The contract check needs every other answer first, whatever the order
    # of the arguments.
    items.sort(key=_is_contract)
    CONTRACT.api_tests = {item.nodeid for item in items if _here(item) and not _is_contract(item)}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" and not report.skipped and report.nodeid in CONTRACT.api_tests:
        CONTRACT.api_tests_run += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if CONTRACT.failed:
        terminalreporter.write_line(f"contract: the recorded answers are kept in {CONTRACT.folder}")
    if not CONTRACT.checked:
        return
    total = sum(CONTRACT.checked.values())
    terminalreporter.write_line(
        f"contract: {total} API answers checked against /api/v1/openapi.json "
        f"({len(CONTRACT.checked)} method/route/status triples)"
    )
    if config.option.verbose > 0:
        for (method, route, status), count in sorted(CONTRACT.checked.items(), key=lambda kv: (kv[0][1], kv[0])):
            terminalreporter.write_line(f"  {count:6d}  {method:6s} {route} {status}")
        for (method, path, status), count in sorted(CONTRACT.outside.items()):
            terminalreporter.write_line(f"  {count:6d}  {method:6s} {path} {status} (outside the published API)")


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not CONTRACT.failed:
        shutil.rmtree(CONTRACT.folder, ignore_errors=True)


# For the modules that start one ``server`` of their own (a module fixture
# with the settings they test): its /api/v1 over plain HTTP, and the
# official client's admin, both with its token.
@pytest.fixture
def http(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=f"{server.url}/api/v1", headers={"Authorization": f"Bearer {server.token}"}, timeout=60
    ) as client:
        yield client


@pytest.fixture
async def admin(server: Any) -> AsyncIterator[Any]:
    from queen import Queen

    client = Queen(url=server.url, bearer_token=server.token, retry_attempts=1)
    try:
        yield client.admin
    finally:
        await client.close()

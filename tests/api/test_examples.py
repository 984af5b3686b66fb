"""Every script in ``examples/`` runs as a user runs it and prints its outcome.

Each runs as ``python examples/<name>.py`` from the checkout, in a process
of its own, against the session's live server, with the write-scope token
``make token NAME=examples`` makes. The five run one after
another against that server, as the examples' README says they can. What
each prints is checked line by line; only the winner of the nightly
report's lock changes from run to run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT, LiveServer

pytestmark = pytest.mark.live

EXAMPLES = ROOT / "examples"
#: The client prints these as it closes, after the example's own lines.
CLIENT_CLOSING = ["Closing Queen client...", "All buffers flushed", "Queen client closed"]

#: Example file name -> the test that runs it (filled by ``covers``).
COVERED: dict[str, Callable[..., None]] = {}


def covers(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register the test of ``examples/<name>``; it gets the name as ``example``."""

    def register(test: Callable[..., None]) -> Callable[..., None]:
        assert name not in COVERED, f"two tests for {name}"
        COVERED[name] = test
        return pytest.mark.parametrize("example", [name])(test)

    return register


@pytest.fixture(scope="module")
def server(live_server: LiveServer) -> LiveServer:
    return live_server


@pytest.fixture(scope="module")
def token(server: LiveServer) -> str:
    """A token as ``make token NAME=examples`` makes it (scope write)."""
    return server.manage("apitoken", "create", "examples", "--scope", "write").strip().splitlines()[-1]


def run(example: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("QUEEN_", "PYTEST"))}
    return subprocess.run(
        [sys.executable, str(Path("examples", example))],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def printed(server: LiveServer, token: str) -> Callable[[str], list[str]]:
    """Run an example against the module's server: the lines it printed
    before the client's own, once it exited 0 with nothing on stderr."""

    def run_it(example: str) -> list[str]:
        done = run(example, {"QUEEN_URL": server.url, "QUEEN_TOKEN": token})
        assert (done.returncode, done.stderr) == (0, ""), f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        lines = done.stdout.splitlines()
        assert lines[-len(CLIENT_CLOSING) :] == CLIENT_CLOSING, done.stdout
        return lines[: -len(CLIENT_CLOSING)]

    return run_it


@covers("nightly_report.py")
def test_nightly_report_is_written_by_one_worker_and_only_once(example, printed):
    """Three workers start at once: one builds the report and the other two
    skip. Run again, the worker that gets the lock finds the day's report
    already written (the transactionId fence), and there is still one."""
    for run_number, writer in ((1, "done"), (2, "already written")):
        *workers, summary = printed(example)
        outcomes = dict(line.split(": ", 1) for line in workers)
        assert list(outcomes) == ["worker-1", "worker-2", "worker-3"], (run_number, workers)
        assert sorted(outcomes.values()) == sorted([writer, "skipped", "skipped"]), (run_number, workers)
        assert summary == "nightly-reports: 1 report for 2026-10-24", run_number


@covers("order_reminder.py")
def test_order_reminder_commits_the_event_once_and_the_reminder_arrives(example, printed):
    """The same event pushed twice: the first delivery commits its ack, state
    and reminder, the second commits nothing, and the reminder arrives in the
    order's partition, not before its 2 s."""
    assert printed(example) == [
        "order-42 placed, pushed twice",
        "delivery 1: committed the ack, the state and a reminder in 2 s",
        "delivery 2: the event was seen before, nothing committed",
        "order-42 state: {'state': 'placed'}",
        "reminder in partition order-42, not early: {'orderId': 'order-42', 'remind': 'pay'}",
    ]


@covers("kv_compare_and_set.py")
def test_kv_compare_and_set_refuses_the_stale_writer(example, printed):
    """The second write on the version both read is refused with the current
    value; the retry on the new version applies; a counter with max 3
    admits three of five calls."""
    assert printed(example) == [
        "alice and bob read customer-7's cart: {'items': 3}",
        "alice writes {'items': 4} expecting the version she read: applied True",
        "bob writes {'items': 10} expecting the same version: applied False (version), the cart is {'items': 4}",
        "bob adds his 6 items to what is there now: applied True, the cart is {'items': 10}",
        "5 calls against a limit of 3 a minute: admitted 3, refused 2 (limit)",
    ]


@covers("semaphore.py")
def test_semaphore_lets_two_hold_and_everyone_through(example, printed):
    """Five workers on a semaphore of two: two hold at once, never more (in
    the workers' count and the broker's list), and each gets its turn."""
    assert printed(example) == [
        "5 workers, semaphore pdf-exports with limit 2",
        "peak holders at once: 2 (the broker listed at most 2)",
        "every worker got its turn: worker-1, worker-2, worker-3, worker-4, worker-5",
    ]


@covers("consumer_group_dlq.py")
def test_consumer_group_dlq_dead_letters_the_poison_message(example, printed):
    """The poison payment fails three deliveries (retry limit 2) and lands in
    the group's DLQ with its error; the payments around it are booked."""
    assert printed(example) == [
        "booked p-1: 20",
        "p-2 failed (delivery 1): amount is not a number",
        "p-2 failed (delivery 2): amount is not a number",
        "p-2 failed (delivery 3): amount is not a number, moved to the DLQ",
        "booked p-3: 5",
        "DLQ of ledger: p-2 ('amount is not a number')",
    ]


def test_every_example_has_a_test():
    """A new script in examples/ fails here until a test above runs it."""
    assert sorted(path.name for path in EXAMPLES.glob("*.py")) == sorted(COVERED)


@pytest.mark.parametrize("example", sorted(path.name for path in EXAMPLES.glob("*.py")))
def test_an_example_without_a_token_says_so_and_exits_2(example):
    """Without QUEEN_TOKEN an example prints one line on stderr naming it
    and how to make one, and exits 2 before calling any server."""
    done = run(example, {"QUEEN_URL": "http://127.0.0.1:9"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "QUEEN_TOKEN is not set: make one with `make token NAME=examples`\n"

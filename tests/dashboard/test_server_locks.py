"""The server's own locks (the timer loops', the sampler's) are marked apart from the applications'."""

from __future__ import annotations

import re

import pytest

from queenadmin.domain import locks
from queenadmin.domain.locks.operator import SERVER_LOCKS, server_permits_held
from queenadmin.domain.queues.sampler import SAMPLER_LOCK
from queenadmin.domain.timers.ops import LOOP_LOCK

pytestmark = pytest.mark.django_db


@pytest.fixture
def held():
    """Two loops' permits (a timer loop, the sampler) and three applications' permits.

    Returns the timer loop's permit's slot (a semaphore picks one).
    """
    timer = locks.lock_acquire(name=LOOP_LOCK, ttl=30, owner="timers:host-a:1:1", limit=2)
    locks.lock_acquire(name=SAMPLER_LOCK, ttl=30, owner="sampler:host-a:1:2")
    locks.lock_acquire(name="jobs.nightly", ttl=60, owner="w1")
    locks.lock_acquire(name="billing.close", ttl=60, owner="w2", limit=3)
    locks.lock_acquire(name="billing.close", ttl=60, owner="w3", limit=3)
    return {LOOP_LOCK: timer.slot, SAMPLER_LOCK: 0}


def _row(html: str, name: str) -> str:
    """The rows of lock ``name``'s permits (a semaphore picks its slots)."""
    found = re.findall(rf'<tr data-lock="{re.escape(name)}#\d+">(.*?)</tr>', html, re.S)
    assert found, name
    return "".join(found)


def test_the_server_locks_are_the_loops_locks():
    """The names marked as the server's are the ones the loops take."""
    assert set(SERVER_LOCKS) == {LOOP_LOCK, SAMPLER_LOCK}


def test_the_locks_page_labels_the_servers_permits(client_for, operator, held):
    """Only the loops' rows carry the "server" label."""
    html = client_for(operator).get("/locks/").content.decode()
    assert ">server</span>" in _row(html, LOOP_LOCK)
    assert ">server</span>" in _row(html, SAMPLER_LOCK)
    assert "server</span>" not in _row(html, "jobs.nightly")
    # Two permits, each a whole row of eleven cells ("Taken by" among them).
    assert _row(html, "billing.close").count("<td") == 22
    assert "server</span>" not in _row(html, "billing.close")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        (LOOP_LOCK, "stops firing timers: the step in flight commits nothing"),
        (SAMPLER_LOCK, "stops sampling: the sample in flight commits nothing"),
    ],
)
def test_force_release_of_a_server_lock_says_what_it_does(client_for, operator, held, name, says):
    """The confirmation warns that a loop stops and another takes over; a user lock's does not."""
    client = client_for(operator)
    page = client.get(f"/locks/release/?name={name}&slot={held[name]}&lease=x").content.decode()
    assert "This is the server's own lock" in page
    assert says in page
    assert "takes" in page
    assert "data-server-lock" in page
    user = client.get("/locks/release/?name=jobs.nightly&slot=0&lease=x").content.decode()
    assert "data-server-lock" not in user
    assert "This ends the holder" in user


def test_the_overview_counts_the_servers_permits_apart(client_for, operator, held):
    """3 applications' permits, and the loops' 2 beside them."""
    assert server_permits_held() == 2
    html = client_for(operator).get("/").content.decode()
    tile = re.search(r"Lock permits held</span>\s*<span[^>]*>(.*?)</span>\s*</a>", html, re.S)
    assert tile, html
    text = re.sub(r"<[^>]+>", "", tile.group(1))
    assert " ".join(text.split()) == "3 (+2 server)"

"""The overview lists the deepest queues, and its tiles count every queue."""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import time_machine

from queenadmin.dashboard.views import overview
from queenadmin.domain import queues
from queenadmin.domain.audit import Who
from queenadmin.domain.queues import board
from queenadmin.domain.queues import operator as queue_operator
from tests.dashboard_ops.conftest import ack, claim, configure, dead_letter, push

pytestmark = pytest.mark.django_db


@pytest.fixture
def five_queues():
    """``a`` to ``e`` with 1, 5, 3, 2 and 4 messages; ``c`` parks its 3
    (delayed), ``e`` leases 2 of its 4; ``d`` has a dead letter."""
    configure("c", delayedProcessing=3600)
    for name, n in [("a", 1), ("b", 5), ("c", 3), ("d", 2), ("e", 4)]:
        push(name, n)
    assert len(claim("e", batch=2).messages) == 2
    dead_letter("d")


def _tile(html: str, label: str) -> str:
    found = re.search(rf"{re.escape(label)}</span>\s*<span[^>]*>([^<]*)<", html)
    assert found, html
    return found.group(1).strip()


def _listed(html: str) -> list[str]:
    return re.findall(r'<td class="key"><a href="/queues/([^/]+)/">', html)


def test_the_deepest_are_kept_and_every_queue_is_summed(five_queues):
    """The boards kept are the deepest, ties by name; the totals are every queue's."""
    boards, totals = board.queue_boards_deepest(limit=3)
    assert [b.name for b in boards] == ["b", "e", "c"]
    assert [b.pending for b in boards] == [5, 4, 3]
    # Every fact of a kept board is the one /queues/ shows.
    listed = {b.name: b for b in board.queue_boards()}
    assert boards == [listed["b"], listed["e"], listed["c"]]
    assert totals == board.BoardTotals(queues=5, claimable=1 + 5 + 2 + 2, parked=3, in_flight=2)


def test_the_overview_shows_the_deepest_and_counts_them_all(five_queues, viewer, monkeypatch):
    """Past ``OVERVIEW_QUEUES`` the table keeps the deepest and links to the
    list; the tiles still count every queue's messages and dead letters."""
    monkeypatch.setattr(overview, "OVERVIEW_QUEUES", 2)
    page = viewer.get("/").content.decode()
    assert _listed(page) == ["b", "e"]
    assert "The 2 deepest of 5 queues" in page
    assert _tile(page, "Claimable") == "10"
    assert _tile(page, "Parked (delayed)") == "3"
    assert _tile(page, "In flight") == "2"
    assert _tile(page, "Dead letters") == "1"


def test_every_queue_is_listed_when_they_fit(five_queues, viewer):
    """With no more queues than the table holds, all are listed, deepest first,
    and nothing says some are left out."""
    page = viewer.get("/").content.decode()
    assert _listed(page) == ["b", "e", "c", "d", "a"]
    assert "data-queues-shown" not in page


def _mixed_broker(seed: int, traveller: Any) -> None:
    """Queues in every state the depth reads: several partitions, named
    groups (some tied, some leasing), queue mode, a delay, expired and live
    leases, acks, dead letters, a purge, and retention that leaves a
    group's cursor below the log start."""
    rng = random.Random(seed)
    configure("retained", retentionSeconds=10)
    push("retained", 4, "p0")
    ack(claim("retained", group="late", batch=1))
    traveller.shift(timedelta(seconds=60))
    assert queues.queue_retention_sweep().deleted == 4
    push("retained", 3, "p0")
    configure("delayed", delayedProcessing=3600)
    names = ["plain", "delayed", "groups", "tied", "purged", "idle"]
    for name in names[:-1]:
        for partition in ("p0", "p1", "p2")[: rng.randint(1, 3)]:
            push(name, rng.randint(1, 6), partition)
    configure("idle")
    for group in ("g2", "g1", "g3"):
        for _ in range(rng.randint(1, 3)):
            c = claim("groups", group=group, batch=rng.randint(1, 3), lease_seconds=rng.choice([1, 600]))
            if c.messages and rng.random() < 0.5:
                ack(c)
    # Two groups at the same place, only the second by name holding a lease.
    ack(claim("tied", group="t1", batch=1))
    ack(claim("tied", group="t2", batch=1))
    claim("tied", group="t2", batch=2, lease_seconds=600)
    for _ in range(rng.randint(1, 3)):
        c = claim("plain", batch=rng.randint(1, 4), lease_seconds=rng.choice([1, 600]))
        if c.messages and rng.random() < 0.5:
            ack(c, rng.choice(["completed", "dlq"]))
    claim("purged", group="late", batch=1)
    queue_operator.queue_purge(queue="purged", who=Who("test"), batch=2)
    push("purged", 2, "p0")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_summed_depth_is_what_every_board_says(seed):
    """The depth of every queue in one statement (the overview's tiles and
    the order of its table) agrees with the boards of /queues/, read queue
    by queue, whatever the groups, leases, delays and log starts."""
    with time_machine.travel(datetime.now(UTC), tick=False) as traveller:
        _mixed_broker(seed, traveller)
        traveller.shift(timedelta(seconds=5))
        every = board.queue_boards()
        boards, totals = board.queue_boards_deepest(limit=len(every))
    assert totals == board.BoardTotals(
        queues=len(every),
        claimable=sum(b.claimable for b in every),
        parked=sum(b.parked for b in every),
        in_flight=sum(b.in_flight for b in every),
    )
    assert boards == sorted(every, key=lambda b: (-b.pending, b.name))
    assert min(totals.claimable, totals.parked, totals.in_flight) > 0
    assert {type(n) for n in (totals.claimable, totals.parked, totals.in_flight)} == {int}

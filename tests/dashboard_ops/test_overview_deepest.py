"""The overview lists the deepest queues, and its tiles count every queue."""

from __future__ import annotations

import re

import pytest

from queenadmin.dashboard.views import overview
from queenadmin.domain.queues import board
from tests.dashboard_ops.conftest import claim, configure, dead_letter, push

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

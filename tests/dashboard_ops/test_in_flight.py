"""In flight counts the messages leased by every consumer group, not the slowest one's."""

from __future__ import annotations

import re

import pytest

from queenadmin.domain.queues import board
from queenadmin.metrics import store as metrics_store
from tests.dashboard_ops.conftest import claim, push

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_groups():
    """Queue ``orders``: 100 messages, ``fulfillment`` leases 80, ``billing`` 45."""
    push("orders", 100)
    assert len(claim("orders", group="fulfillment", batch=80).messages) == 80
    assert len(claim("orders", group="billing", batch=45).messages) == 45


def _tile(html: str) -> str:
    found = re.search(r"In flight</span>\s*<span[^>]*>([^<]*)<", html)
    assert found, html
    return found.group(1).strip()


def _row_cells(html: str, marker: str) -> list[str]:
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        if marker in row:
            return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
    raise AssertionError(f"no row with {marker!r}")


def test_the_board_sums_every_groups_leases(two_groups):
    """Partition and queue in flight is 80 + 45; each group keeps its own."""
    qb = board.queue_board(name="orders")
    assert qb is not None
    assert [p.in_flight for p in qb.partitions] == [125]
    assert qb.in_flight == 125
    assert {g.name: g.in_flight for g in qb.groups} == {"billing": 45, "fulfillment": 80}
    # Depth stays the slowest group's: 100 not yet done by either.
    assert qb.pending == 100
    assert board.queue_in_flight() == {"orders": 125}


def test_the_pages_show_every_groups_leases(two_groups, viewer):
    """The queue page (tile, partition and group rows), the list and the overview say 125."""
    page = viewer.get("/queues/orders/").content.decode()
    assert _tile(page) == "125"
    assert _row_cells(page, "?partition=Default")[4] == "125"
    assert _row_cells(page, ">fulfillment<")[4] == "80"
    assert _row_cells(page, ">billing<")[4] == "45"
    listed = viewer.get("/queues/").content.decode()
    assert _row_cells(listed, ">orders</a>")[6] == "125"
    assert _tile(viewer.get("/").content.decode()) == "125"


def test_the_metric_counts_every_groups_leases(two_groups):
    """``queenadmin_queue_in_flight`` agrees with the pages."""
    assert metrics_store.read_store().queues["orders"].in_flight == 125
    metrics_store.cache.figures = None
    families = {f.name: f for f in metrics_store.StoreCollector().collect()}
    samples = {s.labels["queue"]: s.value for s in families["queenadmin_queue_in_flight"].samples}
    assert samples == {"orders": 125}

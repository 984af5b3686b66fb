"""The overview and ``/kv/`` give a namespace the same key count."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import time_machine

from queenadmin.domain import clock, overview
from queenadmin.domain.kv import kv_put

pytestmark = pytest.mark.django_db


def _count(html: str, namespace: str) -> str:
    found = re.search(rf'<a href="/kv/{namespace}/">{namespace}</a></td>\s*<td class="num">([^<]*)</td>', html)
    assert found, namespace
    return found.group(1).strip()


def test_overview_and_kv_page_agree_past_the_bounded_count(viewer, monkeypatch):
    """Past the overview's old cap (here 5), both pages say 1,204, one expired row included."""
    monkeypatch.setattr(overview, "KV_COUNT_CAP", 5)
    for i in range(1_203):
        kv_put(namespace="big", key=f"k{i}", value=i, ttl=None)
    kv_put(namespace="big", key="brief", value=0, ttl=timedelta(seconds=1))
    with time_machine.travel(clock.now() + timedelta(seconds=5)):
        home = viewer.get("/").content.decode()
        kv_page = viewer.get("/kv/").content.decode()
    assert _count(home, "big") == _count(kv_page, "big") == "1,204"

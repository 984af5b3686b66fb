"""Detail pages of the admin that an operator reads: a consumer group's
page says where it stands on each partition, and times name their zone."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from queenadmin.domain import timers
from queenadmin.domain.masking import mask_token
from queenadmin.models import ConsumerGroup
from tests.dashboard_ops.conftest import claim, push

pytestmark = pytest.mark.django_db

ADMIN = "/admin/queenadmin/"


def _readonly(page: str, field: str) -> str:
    found = re.search(rf'<div class="form-row[^"]*field-{field}">(.*?)</div>\s*</div>\s*</div>', page, re.S)
    assert found, f"no {field} on the page"
    return found.group(1)


def _text(fragment: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment)).strip()


def test_a_consumer_groups_page_shows_where_it_stands_on_each_partition(operator):
    push("orders", 5, "p1")
    push("orders", 3, "p2")
    got = claim("orders", group="billing", batch=2, partition="p1")
    assert len(got.messages) == 2
    group = ConsumerGroup.objects.get(queue__name="orders", name="billing")
    page = operator.get(f"{ADMIN}consumergroup/{group.pk}/change/").content.decode()
    assert _text(_readonly(page, "lag")).endswith("8")
    assert _text(_readonly(page, "in_flight")).endswith("2")
    table = _readonly(page, "partitions")
    rows = [_text(row) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    assert (
        rows[0]
        == "partition done up to last offset pending leased lease leased until retries dead-lettered delivered / acked / failed last claim"
    )
    # p1: nothing done, 5 pushed (offsets 0..4), 2 of them leased under a masked lease id.
    p1 = rows[1].split(" ")
    assert p1[:6] == ["p1", "nothing", "4", "5", "2", mask_token(got.lease_id)]
    assert got.lease_id not in page
    assert re.search(r"UTC", rows[1]), "the lease's end has no zone"
    assert 'href="/queues/orders/"' in _readonly(page, "on_the_dashboard")


def test_admin_times_name_their_zone(operator):
    push("orders", 1, "p1")
    claim("orders", group="billing", batch=1, partition="p1")
    group = ConsumerGroup.objects.get(queue__name="orders", name="billing")
    page = operator.get(f"{ADMIN}consumergroup/{group.pk}/change/").content.decode()
    assert re.fullmatch(
        r"[A-Z][a-z]+\.? \d+, \d{4}, .+ UTC", _text(_readonly(page, "created_at")).split(":", 1)[1].strip()
    )
    timers.timer_schedule(queue="mail", timer_key="welcome-1", payload={"to": 1}, delay=timedelta(minutes=5))
    listed = operator.get(f"{ADMIN}timer/").content.decode()
    due = re.search(r'<td class="field-deliver_at[^"]*">(.*?)</td>', listed, re.S)
    assert due, "no due time in the timers list"
    assert due.group(1).strip().endswith("UTC")


def test_an_audit_entrys_before_and_after_show_times_not_iso_strings(operator):
    from queenadmin.domain import kv
    from queenadmin.domain.audit import Who
    from queenadmin.domain.kv.operator import kv_operator_edit
    from queenadmin.models import AuditEntry

    kv.kv_put(namespace="config", key="flag", value=1, ttl=timedelta(hours=1))
    version = kv.kv_get(namespace="config", key="flag").version
    assert kv_operator_edit(
        namespace="config", key="flag", value=2, expect=version, expiry=timedelta(hours=2), who=Who("otto")
    ).applied
    entry = AuditEntry.objects.get(action="kv.edit")
    assert re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", entry.before + entry.after)
    page = operator.get(f"{ADMIN}auditentry/{entry.pk}/change/").content.decode()
    for side in ("before_shown", "after_shown"):
        shown = _readonly(page, side)
        assert re.search(r'<time datetime="[^"]+">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>', shown), side
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:\d\d", _text(shown)), side


def test_a_consumer_groups_page_and_list_say_its_conflation_policy(operator):
    """The stored policy shows on the group's page and in the groups list."""
    push("orders", 2, "p1")
    claim("orders", group="latest", conflation=True)
    claim("orders", group="every")
    latest = ConsumerGroup.objects.get(queue__name="orders", name="latest")
    every = ConsumerGroup.objects.get(queue__name="orders", name="every")
    for group, shown in ((latest, "True"), (every, "False")):
        page = operator.get(f"{ADMIN}consumergroup/{group.pk}/change/").content.decode()
        assert f'alt="{shown}"' in _readonly(page, "conflation")
    listed = operator.get(f"{ADMIN}consumergroup/").content.decode()
    assert len(re.findall(r'<td class="field-conflation">', listed)) == 2

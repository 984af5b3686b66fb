"""A stalled queue's recovery in the admin: consumer group seek, reset and
delete, a queue purge and DLQ replay to the failed group or every group,
through the domain's operator calls (audited, via admin)."""

from __future__ import annotations

import pytest

from queenadmin.domain.queues import board
from queenadmin.models import AuditEntry, ConsumerGroup, DeadLetter, Message, Queue
from tests.admin.conftest import action
from tests.dashboard_ops.conftest import ack, claim, push

pytestmark = pytest.mark.django_db

ADMIN = "/admin/queenadmin/"


@pytest.fixture
def groups() -> None:
    """Queue q with groups a and b, both done with 3 messages."""
    push("q", 3)
    ack(claim("q", group="a", batch=3))
    ack(claim("q", group="b", batch=3))


def lag(group: str) -> int:
    qb = board.queue_board(name="q")
    assert qb is not None
    return next(g.lag for g in qb.groups if g.name == group)


def group_ids(*names: str) -> list[int]:
    return list(ConsumerGroup.objects.filter(name__in=names).values_list("pk", flat=True))


def test_seek_to_the_start_asks_then_moves_each_selected_group(operator, groups):
    asked = operator.post(f"{ADMIN}consumergroup/", {"action": "seek_start", "_selected_action": group_ids("a", "b")})
    assert "Each group reads every message still stored again" in asked.content.decode()
    assert "invalid or expired lease" in asked.content.decode()
    done = operator.post(
        f"{ADMIN}consumergroup/", action("seek_start", group_ids("a", "b"), reason="redo"), follow=True
    )
    assert "Moved to the start 2 rows." in done.content.decode()
    assert (lag("a"), lag("b")) == (3, 3)
    entries = AuditEntry.objects.filter(action="queue.group_seek")
    assert sorted(entries.values_list("target", flat=True)) == ["q/a", "q/b"]
    assert set(entries.values_list("via", "reason")) == {("admin", "redo")}


def test_seek_to_a_time_and_to_the_end_and_reset(operator, groups):
    operator.post(f"{ADMIN}consumergroup/", action("seek_time", group_ids("a"), reason="x", at="2000-01-01 00:00:00"))
    assert lag("a") == 3
    bad = operator.post(f"{ADMIN}consumergroup/", action("seek_time", group_ids("a"), reason="x", at="soon"))
    assert "errorlist" in bad.content.decode()
    operator.post(f"{ADMIN}consumergroup/", action("seek_end", group_ids("a"), reason="x"))
    assert lag("a") == 0
    operator.post(f"{ADMIN}consumergroup/", action("reset_groups", group_ids("a"), reason="x"))
    assert lag("a") == 3
    assert list(AuditEntry.objects.order_by("id").values_list("action", flat=True)) == [
        "queue.group_seek",
        "queue.group_seek",
        "queue.group_reset",
    ]


def test_delete_a_group_needs_its_name_typed(operator, groups):
    wrong = operator.post(
        f"{ADMIN}consumergroup/", action("delete_group", group_ids("a"), reason="x", confirm_name="b")
    )
    assert "type &#x27;a&#x27; exactly" in wrong.content.decode()
    assert ConsumerGroup.objects.filter(name="a").exists()
    many = operator.post(f"{ADMIN}consumergroup/", action("delete_group", group_ids("a", "b"), reason="x"), follow=True)
    assert "Select exactly one consumer group" in many.content.decode()
    done = operator.post(
        f"{ADMIN}consumergroup/", action("delete_group", group_ids("a"), reason="gone", confirm_name="a"), follow=True
    )
    assert "Deleted the group a on q." in done.content.decode()
    assert list(ConsumerGroup.objects.values_list("name", flat=True)) == ["b"]
    assert AuditEntry.objects.get().action == "queue.group_delete"


def test_purge_a_queue_needs_its_name_typed(operator, groups):
    q = Queue.objects.get(name="q")
    wrong = operator.post(f"{ADMIN}queue/", action("purge_queue", [q.pk], reason="x", confirm_name="Q"))
    assert "type &#x27;q&#x27; exactly" in wrong.content.decode()
    assert Message.objects.count() == 3
    done = operator.post(f"{ADMIN}queue/", action("purge_queue", [q.pk], reason="junk", confirm_name="q"), follow=True)
    assert "Purged 3 messages of q." in done.content.decode()
    assert not Message.objects.exists()
    entry = AuditEntry.objects.get()
    assert (entry.action, entry.via, entry.reason) == ("queue.purge", "admin", "junk")


def test_replay_to_the_failed_group_or_to_every_group(operator):
    push("r", 2)
    c = claim("r", group="a", batch=2)
    ack(c, "dlq", "bad")
    ack(claim("r", group="b", batch=2))
    first, second = DeadLetter.objects.order_by("id").values_list("pk", flat=True)
    asked = operator.post(f"{ADMIN}deadletter/", {"action": "replay", "_selected_action": [first]})
    assert "Who gets each copy" in asked.content.decode()
    assert "dlq:&lt;dead letter id&gt;" in asked.content.decode()
    done = operator.post(f"{ADMIN}deadletter/", action("replay", [first], reason="x"), follow=True)
    assert "Replayed 1 dead letters, for the group that failed each only (transactionId dlq:&lt;id&gt;)." in (
        done.content.decode()
    )
    assert Message.objects.get(transaction_id=f"dlq:{first}").for_group == "a"
    operator.post(f"{ADMIN}deadletter/", action("replay", [second], reason="x", target="all"))
    assert Message.objects.get(transaction_id=f"dlq:{second}").for_group is None


def test_a_viewer_may_not_recover(viewer, groups):
    q = Queue.objects.get(name="q")
    assert viewer.post(f"{ADMIN}queue/", action("purge_queue", [q.pk], reason="x", confirm_name="q")).status_code == 403
    for name in ("seek_start", "seek_end", "reset_groups"):
        assert viewer.post(f"{ADMIN}consumergroup/", action(name, group_ids("a"), reason="x")).status_code == 403
    gone = action("delete_group", group_ids("a"), reason="x", confirm_name="a")
    assert viewer.post(f"{ADMIN}consumergroup/", gone).status_code == 403
    assert Message.objects.count() == 3
    assert not AuditEntry.objects.exists()

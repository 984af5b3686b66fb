"""Operator reads and consumer-group writes against the real database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from queenadmin.domain import queues
from queenadmin.domain.queues import browse, groups, reads, traces
from queenadmin.models import ConsumerCursor, Trace, TraceName, TraceNameSummary
from queenadmin.plumbing.db import json_text

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 10, 8, 10, 0, 0, tzinfo=UTC)


def push(queue: str, n: int, partition: str = "p") -> None:
    queues.queue_push(items=[queues.PushItem(queue, partition, json_text({"i": i})) for i in range(n)])


def consume(queue: str, group: str, n: int) -> None:
    c = queues.queue_claim(request=queues.PopRequest(queue=queue, group=group, batch=n))
    queues.queue_ack(
        items=[
            queues.AckItem(i, m.transaction_id, str(m.partition_id), "completed", c.lease_id, None, group)
            for i, m in enumerate(c.messages)
        ]
    )


def test_lagging_lists_a_partition_once_its_oldest_unfinished_message_is_old_enough():
    """The lag is the age of the oldest message the group has not finished, measured by the server clock."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("orders", 3)
        traveller.shift(timedelta(minutes=10))
        push("orders", 1)
        consume("orders", "billing", 1)
        assert browse.group_lagging(min_lag_seconds=3600) == []
        traveller.shift(timedelta(hours=1))
        (row,) = [x for x in browse.group_lagging(min_lag_seconds=3600) if x.row.group == "billing"]
        # Message 2 (pushed at T0) is the oldest unfinished one.
        assert (row.row.queue, row.row.partition, row.row.lag, row.oldest_at) == ("orders", "p", 3, T0)
        assert row.lag_seconds == 70 * 60


def test_lagging_compares_the_exact_age_not_its_whole_seconds():
    """Half a second old is older than 0 seconds (it used to be read as 0,
    not over 0), and 1.5 s is not older than 2; the answer's seconds are whole."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("orders", 1)
        consume("orders", "billing", 0)
        traveller.shift(timedelta(milliseconds=500))
        (row,) = [x for x in browse.group_lagging(min_lag_seconds=0) if x.row.group == "billing"]
        assert row.lag_seconds == 0
        traveller.shift(timedelta(seconds=1))
        assert [x for x in browse.group_lagging(min_lag_seconds=2) if x.row.group == "billing"] == []


def test_seek_to_a_time_places_the_cursor_after_the_last_message_pushed_by_then():
    """The group reads next the first message pushed after the time; its lease and delivery counts go."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("orders", 2)
        traveller.shift(timedelta(minutes=1))
        push("orders", 3)
        consume("orders", "billing", 10)
        seek = groups.queue_group_seek(
            group="billing", queue="orders", to_end=False, timestamp=T0 + timedelta(seconds=30)
        )
        assert seek.partitions == 1
        cursor = ConsumerCursor.objects.get(group="billing")
        assert (cursor.committed_offset, cursor.lease_id, cursor.delivery_runs) == (1, None, [])


def test_fetch_budget_always_reads_one_record_first():
    """A record larger than the byte budget still comes back alone, so a reader never stalls."""
    push("big", 3)
    (entry,) = reads.queue_fetch(entries=[reads.FetchEntry("big", "p", 0, 1)], max_bytes=1)
    assert [r.offset for r in entry.records] == [0]
    (entry,) = reads.queue_fetch(entries=[reads.FetchEntry("big", "p", 1, 10_000)], max_bytes=10_000)
    assert [r.offset for r in entry.records] == [1, 2]
    assert (entry.high_watermark, entry.log_start, entry.error) == (3, 0, None)


def test_deleting_a_queue_deletes_its_traces():
    """A queue delete takes its traces and their names along."""
    push("traced", 1)
    c = queues.queue_claim(request=queues.PopRequest(queue="traced"))
    (m,) = c.messages
    traces.trace_record(
        partition_id=m.partition_id,
        transaction_id=m.transaction_id,
        group="g",
        event_type="info",
        data_json="{}",
        names=["a"],
    )
    assert (Trace.objects.count(), TraceName.objects.count()) == (1, 1)
    assert queues.queue_delete(name="traced")
    assert (Trace.objects.count(), TraceName.objects.count()) == (0, 0)


def test_message_pages_merge_partitions_newest_first_within_the_window():
    """Pages run newest first across partitions, offset by offset; the window's start ends the scan."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("paged", 2, partition="a")  # old: outside the last hour below
        traveller.shift(timedelta(hours=2))
        order = []
        for i in range(6):
            partition = "a" if i % 2 else "b"
            queues.queue_push(items=[queues.PushItem("paged", partition, json_text(i), f"t{i}")])
            order.append(f"t{i}")
        newest = list(reversed(order))
        page = browse.message_list(query=browse.MessageQuery(queue="paged", limit=3, offset=2))
        assert [r.transaction_id for r in page] == newest[2:5]
        everything = browse.message_list(query=browse.MessageQuery(queue="paged", limit=100))
        assert [r.transaction_id for r in everything] == newest
        since_start = browse.message_list(query=browse.MessageQuery(queue="paged", since=T0, limit=100))
        assert len(since_start) == 8
        old = browse.message_list(query=browse.MessageQuery(queue="paged", since=T0, until=T0, limit=100))
        assert [(r.partition, r.offset) for r in old] == [("a", 1), ("a", 0)]
        c = queues.queue_claim(request=queues.PopRequest(queue="paged", partition="b", batch=1))
        (first_b,) = c.messages
        done = browse.message_list(query=browse.MessageQuery(queue="paged", status="processing", limit=10))
        assert [r.transaction_id for r in done] == [first_b.transaction_id]
        assert [r.offset for r in browse.message_list(query=browse.MessageQuery(partition="a", limit=2))] == [4, 3]


def _trace(queue: str, index: int, *names: str) -> None:
    c = queues.queue_claim(request=queues.PopRequest(queue=queue, batch=100, lease_seconds=1))
    m = c.messages[index] if c.messages else None
    assert m is not None
    traces.trace_record(
        partition_id=m.partition_id,
        transaction_id=m.transaction_id,
        group="g",
        event_type="info",
        data_json="{}",
        names=names,
    )


def test_trace_name_counts_are_kept_by_writes_and_deletes():
    """A name counts its events and distinct messages; a queue delete takes its share out."""
    with time_machine.travel(T0, tick=False) as traveller:
        push("ta", 2)
        push("tb", 1)
        for index, queue in ((0, "ta"), (0, "ta")):
            _trace(queue, index, "checkout", "checkout")
            traveller.shift(timedelta(seconds=2))
        _trace("tb", 0, "checkout", "email")
        rows = {r.name: r for r in traces.trace_names(limit=10, offset=0)}
        assert (rows["checkout"].traces, rows["checkout"].messages) == (3, 2)
        assert (rows["email"].traces, rows["email"].messages) == (1, 1)
        assert [r.name for r in traces.trace_names(limit=10, offset=0)] == ["checkout", "email"]
        assert queues.queue_delete(name="tb")
        rows = {r.name: r for r in traces.trace_names(limit=10, offset=0)}
        assert set(rows) == {"checkout"}
        assert (rows["checkout"].traces, rows["checkout"].messages, rows["checkout"].last_seen) == (
            2,
            1,
            T0 + timedelta(seconds=2),
        )
        assert TraceNameSummary.objects.count() == 1


def test_seeking_a_group_never_seen_creates_nothing():
    """A mistyped group name moves nothing and leaves no cursor behind."""
    push("orders", 2)
    seek = groups.queue_group_seek(group="bilings", queue="orders", to_end=True)
    assert seek.partitions == 0
    assert not ConsumerCursor.objects.filter(group="bilings").exists()
    assert groups.queue_group_seek(group="billing", queue="nope", to_end=True).partitions == 0


def test_a_busy_partition_reads_past_its_share_of_the_page():
    """With many partitions each reads a small share first; one holding most of the page reads on."""
    for p in range(10):
        queues.queue_push(items=[queues.PushItem("skewed", f"p{p}", json_text(p), f"only-{p}")])
    push("skewed", 30, partition="busy")
    page = browse.message_list(query=browse.MessageQuery(queue="skewed", limit=35))
    assert [r.offset for r in page[:30]] == list(range(29, -1, -1))
    assert {r.partition for r in page[:30]} == {"busy"}
    assert [r.transaction_id for r in page[30:]] == ["only-9", "only-8", "only-7", "only-6", "only-5"]


def test_offset_reads_start_at_the_log_start_retention_moved():
    """After retention deletes a prefix, fetch and discovery report the new log start; an offset below it
    (offset 0 too: it is an offset like any other, not "the log start") is out of range."""
    with time_machine.travel(T0, tick=False) as traveller:
        request = queues.ConfigureRequest(
            "kept", options=queues.QueueOptions((("retentionEnabled", True), ("retentionSeconds", 60)))
        )
        queues.queue_configure(request=request)
        push("kept", 3)
        traveller.shift(timedelta(minutes=5))
        push("kept", 2)
        assert queues.queue_retention_sweep().deleted == 3
        below, zero, start = reads.queue_fetch(
            entries=[
                reads.FetchEntry("kept", "p", 2, 10_000),
                reads.FetchEntry("kept", "p", 0, 10_000),
                reads.FetchEntry("kept", "p", 3, 10_000),
            ],
            max_bytes=10_000,
        )
        assert (below.error, below.log_start, below.high_watermark, below.records) == ("OFFSET_OUT_OF_RANGE", 3, 5, ())
        assert (zero.error, zero.log_start, zero.high_watermark, zero.records) == ("OFFSET_OUT_OF_RANGE", 3, 5, ())
        assert ([r.offset for r in start.records], start.error) == ([3, 4], None)
        (changed,) = reads.partitions_changed(query=reads.ChangedQuery(queue="kept")).partitions
        assert (changed.last_offset, changed.log_start) == (4, 3)
        # A group that never read the partition starts at the log start, not at a deleted offset.
        c = queues.queue_claim(request=queues.PopRequest(queue="kept", group="late", batch=10))
        assert [m.offset for m in c.messages] == [3, 4]


@pytest.mark.django_db
def test_changed_partitions_of_many_queues_look_the_queues_up_at_once(django_assert_num_queries):
    """Each query gets its page, in order; a queue that does not exist is
    not found; the queues are one statement, each found queue's partitions one."""
    push("alpha", 2, partition="a")
    push("beta", 1, partition="b1")
    push("beta", 1, partition="b2")
    queries = [reads.ChangedQuery(queue=name) for name in ("beta", "missing", "alpha", "beta")]
    with django_assert_num_queries(1 + 3):
        pages = reads.partitions_changed_each(queries=queries)
    assert [(p.queue, p.found) for p in pages] == [("beta", True), ("missing", False), ("alpha", True), ("beta", True)]
    assert [c.name for c in pages[0].partitions] == ["b1", "b2"] == [c.name for c in pages[3].partitions]
    assert [(c.name, c.last_offset) for c in pages[2].partitions] == [("a", 1)]
    assert pages[1].partitions == ()

"""Streams in process: the register's outcomes, state ops, and the cycle's
all-or-nothing commit (``domain/streams``), on either database."""

from __future__ import annotations

from uuid import UUID

import pytest
from django.test import override_settings

from queenadmin.domain import queues, streams
from queenadmin.domain.queues.ids import uuid7s
from queenadmin.errors import StreamStateTooLarge
from queenadmin.models import ConsumerCursor, Message, StreamState

pytestmark = pytest.mark.django_db


def _register(name: str = "q", config_hash: str = "h1", *, reset: bool = False) -> streams.Registration:
    return streams.stream_register(
        name=name, source_queue="src", sink_queue="sink", config_hash=config_hash, reset=reset
    )


def _source(count: int = 3) -> tuple[int, queues.Claim]:
    queues.queue_push(items=[queues.PushItem("src", "p", f'{{"n":{i}}}') for i in range(count)])
    claim = queues.queue_claim(request=queues.PopRequest(queue="src", group="g", batch=count))
    assert claim.partition_id is not None
    return claim.partition_id, claim


def _rows(query_id: UUID) -> dict[str, str]:
    return dict(StreamState.objects.filter(query_id=query_id).values_list("key", "value_json"))


def _upsert(key: str, value_json: str = "1") -> streams.StateUpsert:
    return streams.StateUpsert(key, value_json)


def test_register_is_fresh_once_and_keeps_state_on_the_same_hash():
    first = _register()
    assert (first.fresh, first.reset, first.conflict) == (True, False, False)
    pid, _ = _source()
    assert streams.stream_cycle(cycle=streams.Cycle(first.query_id, pid, "g", (_upsert("k"),))).success
    again = _register(reset=True)  # reset with an equal hash wipes nothing
    assert (again.query_id, again.fresh, again.reset) == (first.query_id, False, False)
    assert _rows(first.query_id) == {"k": "1"}


def test_a_changed_hash_conflicts_unless_reset_which_wipes_the_state():
    first = _register()
    pid, _ = _source()
    streams.stream_cycle(cycle=streams.Cycle(first.query_id, pid, "g", (_upsert("k"),)))
    conflict = _register(config_hash="h2")
    assert conflict.conflict is True
    assert conflict.stored_hash == "h1"
    assert _rows(first.query_id) == {"k": "1"}
    reset = _register(config_hash="h2", reset=True)
    assert (reset.query_id, reset.reset, reset.conflict) == (first.query_id, True, False)
    assert _rows(first.query_id) == {}
    assert _register(config_hash="h2").conflict is False


def test_the_last_op_of_a_key_decides_it():
    query = _register()
    pid, _ = _source()
    ops = (_upsert("a", "1"), streams.StateDelete("a"), _upsert("b", "1"), _upsert("b", "2"), _upsert("c"))
    outcome = streams.stream_cycle(cycle=streams.Cycle(query.query_id, pid, "g", ops))
    assert outcome.success
    assert outcome.state_ops_applied == 5
    assert _rows(query.query_id) == {"b": "2", "c": "1"}


def test_a_failing_ack_rolls_back_the_state_and_the_pushes():
    query = _register()
    pid, claim = _source()
    last = claim.messages[-1].transaction_id
    cycle = streams.Cycle(
        query.query_id,
        pid,
        "g",
        (_upsert("k"),),
        (queues.PushItem("sink", "p", "{}"),),
        streams.CycleAck(last, queues.uuid7(), 3),  # not the pop's lease
    )
    outcome = streams.stream_cycle(cycle=cycle)
    assert outcome.success is False
    assert "invalid or expired lease" in (outcome.error or "")
    assert _rows(query.query_id) == {}
    assert not Message.objects.filter(partition__queue__name="sink").exists()
    ok = streams.stream_cycle(
        cycle=streams.Cycle(**{**cycle.__dict__, "ack": streams.CycleAck(last, claim.lease_id, 3)})
    )
    assert ok.success
    assert ok.acked == streams.CycleAcked(3, True)
    assert ConsumerCursor.objects.get(partition_id=pid, group="g").committed_offset == claim.messages[-1].offset


def test_a_partition_of_another_queue_is_not_found():
    query = _register()
    queues.queue_push(items=[queues.PushItem("other", "p", "1")])
    other = queues.queue_claim(request=queues.PopRequest(queue="other", group="g")).partition_id
    assert other is not None
    outcome = streams.stream_cycle(cycle=streams.Cycle(query.query_id, other, "g", (_upsert("k"),)))
    assert (outcome.success, outcome.error) == (False, "partition not found")


@override_settings(QUEENADMIN_STREAMS_MAX_STATE_VALUE_BYTES=10)
def test_a_value_over_the_limit_refuses_the_cycle():
    query = _register()
    pid, _ = _source()
    with pytest.raises(StreamStateTooLarge):
        streams.stream_cycle(cycle=streams.Cycle(query.query_id, pid, "g", (_upsert("k", '"' + "x" * 10 + '"'),)))
    assert _rows(query.query_id) == {}


def test_ripe_at_is_the_window_end_rounded_up():
    assert streams.ripe_at_ms({"windowEnd": 5000}) == 5000
    assert streams.ripe_at_ms({"windowEnd": 5000.2}) == 5001
    for value in ({"windowEnd": True}, {"windowEnd": "5"}, {"acc": 1}, [1], 3):
        assert streams.ripe_at_ms(value) is None


def test_message_ids_sort_in_the_order_they_were_minted():
    ids = uuid7s(1000) + uuid7s(1) + uuid7s(50)
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    assert all(UUID(i).version == 7 for i in ids)


@pytest.mark.parametrize(("release", "through"), [(True, -1), (False, 0)])
def test_a_releasing_ack_completes_the_whole_batch_and_a_partial_one_keeps_the_lease(release, through):
    """The runner acks the last message in its own order (createdAt, id),
    which need not be the batch's last offset: with ``release_lease`` the
    cursor goes to the end of the batch (Queen's log engine); without (a
    gate's partial ack) only to the message named, and the lease stays."""
    query = _register()
    pid, claim = _source(3)
    first = claim.messages[0]
    cycle = streams.Cycle(
        query.query_id,
        pid,
        "g",
        ack=streams.CycleAck(first.transaction_id, claim.lease_id, 1),
        release_lease=release,
    )
    outcome = streams.stream_cycle(cycle=cycle)
    assert outcome.success
    assert outcome.acked == streams.CycleAcked(1, release)
    cursor = ConsumerCursor.objects.get(partition_id=pid, group="g")
    assert cursor.committed_offset == claim.messages[through].offset
    assert (cursor.lease_id is None) is release

"""Consumer heartbeats read from the official client's supervision keys:
fresh, stale, expired, stopped and malformed, never an exception."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest

from queenadmin.domain.kv import kv_put
from queenadmin.domain.supervision import heartbeat_readers, supervision_heartbeats
from tests.supervised import FORMAT, NAMESPACE, client_document, write_beat

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 12, 6, 10, 0, 0, tzinfo=UTC)


def only(now: datetime):
    (beat,) = supervision_heartbeats(now=now).beats
    return beat


def test_a_fresh_heartbeat_of_the_real_client_is_read_whole():
    """Every field the client's document holds comes out typed; the last beat is the server's time."""
    slot = write_beat(now=T0, queue="orders", group="billing", concurrency=4)
    beat = only(T0 + timedelta(seconds=5))
    assert (beat.slot, beat.application, beat.state, beat.problem) == (slot, "billing-app", "running", "")
    assert beat.last_beat == T0
    assert beat.expires_at == T0 + timedelta(seconds=60)
    assert beat.timeout == timedelta(seconds=30)
    assert beat.hostname
    assert beat.pid
    assert beat.reported == "running"
    (pool,) = beat.pools
    assert (pool.queue, pool.group, pool.concurrency, pool.running, pool.busy) == ("orders", "billing", 4, 4, 0)
    assert (pool.completed, pool.failed) == (0, 0)
    assert beat.fresh


def test_queue_mode_is_named_as_the_client_names_it():
    write_beat(now=T0, group=None)
    assert only(T0).pools[0].group == "__QUEUE_MODE__"


def test_a_beat_older_than_three_intervals_is_stale_then_expired_past_its_ttl():
    write_beat(now=T0)
    assert only(T0 + timedelta(seconds=30)).state == "running"
    stale = only(T0 + timedelta(seconds=31))
    assert (stale.state, stale.fresh) == ("stale", False)
    assert stale.stale_at == T0 + timedelta(seconds=30)
    assert only(T0 + timedelta(seconds=60)).state == "expired"


def test_a_consumer_that_said_it_stopped_is_stopped_not_live():
    write_beat(now=T0, state="stopped")
    beat = only(T0 + timedelta(seconds=1))
    assert (beat.state, beat.fresh) == ("stopped", False)


def test_a_document_in_two_chunks_is_put_together():
    _, document = client_document(queue="two-chunks")
    raw = json.dumps(document).encode()
    half = len(raw) // 2
    chunks = [
        {"write": "w2", "index": i, "data": base64.b64encode(part).decode()}
        for i, part in enumerate((raw[:half], raw[half:]))
    ]
    head = {"format": FORMAT, "write": "w2", "chunks": 2, "bytes": len(raw)}
    write_beat(now=T0, head=head, chunks=chunks)
    beat = only(T0)
    assert (beat.state, beat.pools[0].queue) == ("running", "two-chunks")


def _head(**changes):
    return {"format": FORMAT, "write": "a" * 32, "chunks": 1, "bytes": 10, **changes}


@pytest.mark.parametrize(
    ("head", "chunks", "document", "problem"),
    [
        ("not an object", None, None, "the head is not an object"),
        (_head(format="other/v9"), None, None, "format is not"),
        (_head(write=7), None, None, "names no write"),
        (_head(chunks=0), None, None, "chunks is not a count"),
        (_head(chunks=True), None, None, "chunks is not a count"),
        (None, [], None, "chunk 0000 is missing"),
        (None, [{"write": "b" * 32, "index": 0, "data": ""}], None, "another write"),
        (None, [{"write": "a" * 32, "index": 0, "data": "***"}], None, "not base64"),
        (None, None, b"\xff\xfe not utf-8", "not UTF-8 JSON"),
        (None, None, b"{not json", "not UTF-8 JSON"),
        (None, None, [1, 2], "not an object"),
        (None, None, {"schema": "someone.else/v1"}, "schema is not"),
        (None, None, {"schema": "queen.consumer.status/v1", "pool_status": {}}, "pool_status is not a list"),
        (None, None, {"schema": "queen.consumer.status/v1", "pool_status": [7]}, "not an object"),
        (
            None,
            None,
            {"schema": "queen.consumer.status/v1", "pool_status": [{"desired": -1}]},
            "desired is not a count",
        ),
        (
            None,
            None,
            {"schema": "queen.consumer.status/v1", "pool_status": [{"queue": "\ud800"}]},
            "queue is not text",
        ),
        (
            None,
            None,
            {"schema": "queen.consumer.status/v1", "pool_status": [], "started_at_epoch": 1e300},
            "started_at_epoch is out of range",
        ),
    ],
)
def test_a_malformed_heartbeat_is_shown_as_such(head, chunks, document, problem):
    """Whatever is stored under the namespace, the read says what is wrong instead of failing."""
    slot = write_beat(now=T0, head=head, chunks=chunks, document=document)
    beat = only(T0)
    assert (beat.slot, beat.state, beat.fresh) == (slot, "malformed", False)
    assert problem in beat.problem
    assert beat.last_beat == T0


def test_the_size_the_head_gives_must_be_the_documents():
    _, document = client_document()
    raw = json.dumps(document).encode()
    write_beat(
        now=T0,
        head=_head(bytes=len(raw) + 1),
        chunks=[{"write": "a" * 32, "index": 0, "data": base64.b64encode(raw).decode()}],
    )
    assert "the head says" in only(T0).problem


def test_chunks_without_a_head_and_keys_of_other_shapes():
    kv_put(namespace=NAMESPACE, key="app/lost/chunk/0000", value={"write": "x"}, ttl=60, now=T0)
    kv_put(namespace=NAMESPACE, key="not-a-heartbeat", value=1, ttl=60, now=T0)
    kv_put(namespace=NAMESPACE, key="app/x/other", value=1, ttl=60, now=T0)
    beat = only(T0)
    assert (beat.slot, beat.state, beat.problem) == ("app/lost", "malformed", "chunks without a head")


def test_readers_are_the_fresh_heartbeats_queues_by_name_or_scope():
    write_beat(now=T0, queue="orders")
    write_beat(now=T0, application="mail", queue=None, namespace="billing", task=None)
    write_beat(now=T0 - timedelta(minutes=5), application="old", queue="forgotten", ttl=3600)
    readers = heartbeat_readers(supervision_heartbeats(now=T0))
    assert readers.read(queue="orders", namespace=None, task=None)
    assert readers.read(queue="invoices", namespace="billing", task="any")
    assert not readers.read(queue="invoices", namespace="shipping", task=None)
    # Its last beat is five minutes old: stale, so no reader.
    assert not readers.read(queue="forgotten", namespace=None, task=None)


def test_no_heartbeats_no_rows():
    assert supervision_heartbeats(now=T0).beats == ()

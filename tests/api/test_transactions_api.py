"""POST /api/v1/transaction over HTTP (Django's test client): exact answers,
every rollback reason, the 400s, and nothing visible after a rollback."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from django.test import Client

from queenadmin.domain import kv, locks, queues, tokens
from queenadmin.models import ConsumerCursor, KVEntry, Message, Timer

pytestmark = pytest.mark.django_db


@pytest.fixture
def client() -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {tokens.token_create(by=tokens.HOST, name='txn-tests')}")


def commit(client: Client, body: Any) -> Any:
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post("/api/v1/transaction", data=data, content_type="application/json")


def pop(queue: str, batch: int = 10, group: str = queues.QUEUE_MODE) -> queues.Claim:
    return queues.queue_claim(request=queues.PopRequest(queue=queue, batch=batch, group=group))


def push(queue: str, n: int) -> None:
    queues.queue_push(items=[queues.PushItem(queue, "Default", json.dumps(i), f"{queue}-{i}") for i in range(n)])


def nothing_changed() -> None:
    assert not Message.objects.filter(partition__queue__name="out").exists()
    assert not KVEntry.objects.filter(namespace="state").exists()
    assert not Timer.objects.exists()


def ack_op(claim: queues.Claim, i: int, **extra: Any) -> dict[str, Any]:
    m = claim.messages[i]
    return {"type": "ack", "transactionId": m.transaction_id, "partitionId": str(m.partition_id), **extra}


def test_a_worker_step_commits_ack_push_state_and_timer_together(client):
    """The seeds' step: ack the input, push the output, write state, schedule a reminder."""
    push("in", 2)
    claim = pop("in", batch=1)
    body = {
        "operations": [
            ack_op(claim, 0, leaseId=claim.lease_id, status="completed"),
            {
                "type": "push",
                "items": [{"queue": "out", "partition": "c-1", "payload": {"x": 1}, "transactionId": "o-1"}],
            },
        ],
        "requiredLeases": [claim.lease_id],
        "kv": [{"op": "put", "ns": "state", "key": "c-1", "value": {"n": 1}, "forever": True}],
        "timers": [
            {
                "op": "schedule",
                "queue": "out",
                "timerKey": "c-1:remind",
                "delayMs": 60000,
                "txn": "r-1",
                "payload": base64.b64encode(b'{"remind":1}').decode(),
            }
        ],
    }
    response = commit(client, body)
    assert response.status_code == 200
    answer = response.json()
    assert answer["success"] is True
    results = answer["results"]
    assert [(r["index"], r["type"]) for r in results] == [(0, "ack"), (1, "push"), (2, "kv"), (3, "timer")]
    assert results[0] == {
        "index": 0,
        "type": "ack",
        "success": True,
        "transactionId": "in-0",
        "error": None,
        "dlq": False,
    }
    (out,) = Message.objects.filter(partition__queue__name="out")
    assert results[1] == {
        "index": 1,
        "type": "push",
        "success": True,
        "transactionId": "o-1",
        "messageId": out.message_id,
        "queueName": "out",
    }
    assert results[2]["opIndex"] == 0
    assert (results[2]["op"], results[2]["applied"], results[2]["value"]) == ("put", True, {"n": 1})
    assert (results[3]["opIndex"], results[3]["status"], results[3]["txn"]) == (0, "scheduled", "r-1")
    assert ConsumerCursor.objects.get(group=queues.QUEUE_MODE).committed_offset == 0
    assert kv.kv_get(namespace="state", key="c-1").value == {"n": 1}


def test_a_lost_guard_rolls_everything_back_with_the_flat_failed_index(client):
    push("in", 1)
    claim = pop("in")
    guard = locks.lock_acquire(name="job", ttl=60, owner="a")
    body = {
        "operations": [
            ack_op(claim, 0, leaseId=claim.lease_id),
            {"type": "push", "items": [{"queue": "out", "payload": 1}, {"queue": "out", "payload": 2}]},
        ],
        "requiredLeases": [claim.lease_id],
        "kv": [
            {"op": "check", "ns": "queen-locks", "key": "job#0", "expect": guard.token + 1, "required": True},
            {"op": "put", "ns": "state", "key": "k", "value": 1, "forever": True},
        ],
        "timers": [{"op": "schedule", "queue": "out", "timerKey": "t", "delayMs": 1, "txn": "t", "payload": "MQ=="}],
    }
    answer = commit(client, body).json()
    transaction_id = answer.pop("transactionId")
    assert len(transaction_id) == 36
    assert answer == {
        "success": False,
        "reason": "kv_precondition",
        "error": "QKV a required KV precondition failed; the transaction rolled back",
        "results": [],
        "ok": False,
        "failedIndex": 3,
        "kvReason": "version",
        "version": guard.token,
        "value": {"owner": "a"},
    }
    nothing_changed()
    assert ConsumerCursor.objects.get(group=queues.QUEUE_MODE).committed_offset == -1


def test_a_fenced_ack_with_a_stale_lease_rejects_the_bundle(client):
    push("in", 1)
    claim = pop("in")
    body = {
        "operations": [
            ack_op(claim, 0, leaseId="01a22d8e-0000-7000-8000-000000000000"),
            {"type": "push", "items": [{"queue": "out", "payload": 1}]},
        ],
        "requiredLeases": [],
    }
    answer = commit(client, body).json()
    assert (answer["success"], answer["reason"], answer["results"]) == (False, "rejected_ack", [])
    assert answer["error"].startswith("QTXN the ack of in-0 was rejected")
    nothing_changed()


def test_an_ack_without_its_own_lease_is_fenced_by_the_one_required_lease(client):
    push("in", 1)
    claim = pop("in")
    stale = {
        "operations": [ack_op(claim, 0)],
        "requiredLeases": ["01a22d8e-0000-7000-8000-000000000000"],
    }
    assert commit(client, stale).json()["reason"] == "rejected_ack"
    right = {"operations": [ack_op(claim, 0)], "requiredLeases": [claim.lease_id]}
    assert commit(client, right).json()["success"] is True


def test_a_push_whose_transaction_id_is_already_in_the_log_rolls_back_as_duplicate(client):
    queues.queue_push(items=[queues.PushItem("out", "c-9", "0", "once")])
    body = {
        "operations": [
            {"type": "push", "items": [{"queue": "out", "partition": "c-9", "payload": 1, "transactionId": "once"}]}
        ],
        "kv": [{"op": "put", "ns": "state", "key": "k", "value": 1, "forever": True}],
    }
    answer = commit(client, body).json()
    assert (answer["success"], answer["reason"]) == (False, "duplicate")
    assert answer["error"] == (
        "QDUP a pushed message to out/c-9 is a duplicate (original offset 0); the transaction rolled back"
    )
    assert Message.objects.count() == 1
    assert not KVEntry.objects.filter(namespace="state").exists()


def test_bad_request_rollbacks_answer_200(client):
    assert commit(client, {"operations": [], "requiredLeases": []}).json()["reason"] == "bad_request"
    inline = commit(client, {"operations": [{"type": "push", "payload": 1}]})
    assert (inline.status_code, inline.json()["reason"]) == (200, "bad_request")
    not_a_number = commit(client, {"operations": [{"type": "ack", "transactionId": "x", "partitionId": "p-1"}]})
    assert (not_a_number.status_code, not_a_number.json()["reason"]) == (200, "bad_request")
    missing = commit(client, {"positions": [{"queue": "nope", "offset": 1}]})
    assert (missing.status_code, missing.json()["reason"]) == (200, "queue_not_found")


def test_an_incr_the_stored_value_refuses_answers_409_and_commits_nothing(client):
    """The request is valid, the counter's value decides: 409 (a conflict
    with the key's current state) in the KV envelope, as on ``POST /kv``,
    and the bundle is all or nothing."""
    kv.kv_put(namespace="counters", key="n", value=10**100 - 1, ttl=None)
    body = {
        "operations": [{"type": "push", "items": [{"queue": "out", "payload": 1}]}],
        "kv": [
            {"op": "put", "ns": "state", "key": "k", "value": 1, "forever": True},
            {"op": "incr", "ns": "counters", "key": "n", "delta": 1, "forever": True},
        ],
        "timers": [{"op": "schedule", "queue": "out", "timerKey": "t", "delayMs": 1, "txn": "t", "payload": "MQ=="}],
    }
    response = commit(client, body)
    assert response.status_code == 409
    assert response.json() == {
        "error": "kv_bad_request",
        "reason": "kv_bad_request",
        "detail": "the result is beyond what incr computes exactly (magnitude below 1e100, at most 100 decimal places)",
    }
    nothing_changed()
    assert kv.kv_get(namespace="counters", key="n").value == 10**100 - 1


@pytest.mark.parametrize(
    ("op", "status", "answer"),
    [
        # schemathesis's case (QA_SCALE=full): a queue, no payload, a partition
        # with a control character.
        (
            {"type": "push", "items": None, "queue": "q", "partition": "p\x12", "transactionId": " \\"},
            400,
            {"error": "items[0].partition must not contain control characters", "code": "bad_request"},
        ),
        (
            {"type": "push", "partition": "p" * 600},
            413,
            {"error": "items[0].partition is over 511 bytes", "code": "name_too_long"},
        ),
        (
            {"type": "push", "queue": None},
            400,
            {"error": "items[0].queue must be a non-empty string", "code": "bad_request"},
        ),
    ],
)
def test_an_inline_item_without_queue_or_payload_is_refused_for_a_bad_field_first(client, op, status, answer):
    """An inline push missing its queue or payload rolls back (200), but a
    field it has that breaks its rule refuses the call first, as in
    ``items``: the document's rule for that field holds either way."""
    kv_put = {"op": "put", "ns": "state", "key": "k", "value": 1, "forever": True}
    response = commit(client, {"operations": [op], "kv": [kv_put]})
    assert (response.status_code, response.json()) == (status, answer)
    nothing_changed()


def test_an_inline_push_item_is_one_item(client):
    answer = commit(client, {"operations": [{"type": "push", "queue": "out", "payload": {"x": 1}}]}).json()
    assert answer["success"] is True
    assert [r["type"] for r in answer["results"]] == ["push"]


@pytest.mark.parametrize(
    ("body", "status", "shape"),
    [
        ("not json", 400, {"code": "bad_request"}),
        ("[]", 400, {"code": "bad_request"}),
        ({"operations": {"type": "ack"}}, 400, {"code": "bad_request"}),
        ({"kv": "put"}, 400, {"code": "bad_request"}),
        ({"operations": [{"type": "put", "ns": "a", "key": "k"}]}, 400, {"code": "bad_request"}),
        ({"operations": [{"items": []}]}, 400, {"code": "bad_request"}),
        (
            {"kv": [{"op": "getPrefix", "ns": "a", "prefix": "x"}]},
            400,
            {"reason": "kv_get_prefix_not_allowed_in_transaction"},
        ),
        ({"kv": [{"op": "get", "ns": "a", "key": f"k{i}"} for i in range(65)]}, 400, {"reason": "kv_too_many_ops"}),
        (
            {"kv": [{"op": "put", "ns": "a", "key": "k", "value": "x" * 70000, "forever": True}]},
            413,
            {"reason": "kv_value_too_large"},
        ),
        (
            {
                "timers": [
                    {
                        "op": "schedule",
                        "queue": "q",
                        "timerKey": "k",
                        "delayMs": 1,
                        "txn": "t",
                        "payload": "x",
                        "messageId": "m",
                    }
                ]
            },
            400,
            {"reason": "timers_server_owned_field"},
        ),
        (
            {"operations": [{"type": "push", "items": [{"queue": "q" * 600, "payload": 1}]}]},
            413,
            {"code": "name_too_long"},
        ),
    ],
)
def test_malformed_bodies_are_refused_before_anything_runs(client, body, status, shape):
    response = commit(client, body)
    assert response.status_code == status, response.content
    answer = response.json()
    assert {k: answer.get(k) for k in shape} == shape
    nothing_changed()


def test_positions_move_a_groups_cursor_and_release_its_lease(client):
    push("in", 5)
    claim = pop("in", batch=2, group="g")
    answer = commit(client, {"positions": [{"queue": "in", "consumerGroup": "g", "offset": 3}]}).json()
    assert answer["success"] is True
    assert answer["results"] == [{"index": 0, "type": "position", "success": True}]
    assert claim.messages
    assert [m.offset for m in pop("in", group="g").messages] == [3, 4]


def test_a_position_at_offset_0_reads_from_the_first_message_and_a_negative_one_is_refused(client):
    """Offsets start at 0: position 0 is the first message (the group reads
    everything again); -1 is no offset and rolls the bundle back."""
    push("in", 3)
    assert commit(client, {"positions": [{"queue": "in", "consumerGroup": "g", "offset": 3}]}).json()["success"]
    assert pop("in", group="g").messages == ()
    assert commit(client, {"positions": [{"queue": "in", "consumerGroup": "g", "offset": 0}]}).json()["success"]
    assert [m.offset for m in pop("in", batch=10, group="g").messages] == [0, 1, 2]
    refused = commit(client, {"positions": [{"queue": "in", "consumerGroup": "g", "offset": -1}]})
    assert (refused.status_code, refused.json()["reason"]) == (200, "bad_request")
    assert "positions[0].offset is the next offset to read (0 or more) or null" in refused.json()["error"]


@pytest.mark.parametrize(
    ("position", "reason", "error"),
    [
        ({"queue": "in\x00", "offset": 1}, "queue_not_found", "QTXN queue 'in\\x00' does not exist"),
        (
            {"queue": "in", "partition": "p\x00", "offset": 1},
            "bad_request",
            "QTXN queue 'in' has no partition 'p\\x00'",
        ),
    ],
)
def test_a_position_naming_a_queue_or_partition_with_a_nul_rolls_back(client, position, reason, error):
    """A NUL names no queue or partition (no database stores one): the
    bundle rolls back as for any missing one, on both databases
    (PostgreSQL answered 500: it refuses NUL even in a comparison)."""
    push("in", 1)
    answer = commit(client, {"positions": [position]})
    assert answer.status_code == 200
    assert {k: answer.json()[k] for k in ("success", "reason", "error")} == {
        "success": False,
        "reason": reason,
        "error": error,
    }

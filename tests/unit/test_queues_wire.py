"""The message log's protocol layer: what each body or query parses to, and
every refusal with its class, code and message."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from queenadmin.api.wire import configure as configure_wire
from queenadmin.api.wire import queues as wire
from queenadmin.api.wire import resources as resources_wire
from queenadmin.domain import queues
from queenadmin.errors import ConflationRefused, InvalidArgument, NameTooLong, QueenError
from queenadmin.plumbing.db import json_text

LONG = "q" * 512
UUID = "0190f1a2-7b3c-7d4e-8f50-123456789abc"


def refusal(parse, *args):
    with pytest.raises(QueenError) as caught:
        parse(*args)
    exc = caught.value
    return type(exc), exc.code, exc.detail


BAD = (InvalidArgument, "bad_request")
CONFLATION = (ConflationRefused, "bad_request")
TOO_LONG = (NameTooLong, "name_too_long")


# -- configure --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        ([], BAD, "the body must be a JSON object"),
        ({}, BAD, "queue must be a non-empty string"),
        ({"queue": ""}, BAD, "queue must be a non-empty string"),
        ({"queue": 5}, BAD, "queue must be a non-empty string"),
        ({"queue": "a\x00b"}, BAD, "queue must not contain NUL"),
        ({"queue": LONG}, TOO_LONG, "queue is over 511 bytes"),
        ({"queue": "q", "mode": "upsert"}, BAD, "mode must be merge or replace"),
        ({"queue": "q", "options": []}, BAD, "options must be an object"),
        ({"queue": "q", "namespace": 5}, BAD, "namespace must be a string or null"),
        ({"queue": "q", "task": ["t"]}, BAD, "task must be a string or null"),
        ({"queue": "q", "options": {"leaseTime": "5"}}, BAD, "option leaseTime must be an integer"),
        ({"queue": "q", "options": {"retryLimit": 1.5}}, BAD, "option retryLimit must be an integer"),
        ({"queue": "q", "options": {"leaseTime": True}}, BAD, "option leaseTime must be an integer"),
        ({"queue": "q", "options": {"deadLetterQueue": 1}}, BAD, "option deadLetterQueue must be a boolean"),
        ({"queue": "q", "options": {"ttl": -1}}, BAD, "option ttl must be from 0 to 2147483647"),
        ({"queue": "q", "ttl": 2**31}, BAD, "option ttl must be from 0 to 2147483647"),
        ({"queue": "q", "ttl": "x"}, BAD, "option ttl must be an integer"),
        # Options are checked in body order: the first bad one answers.
        ({"queue": "q", "options": {"ttl": -1, "leaseTime": "x"}}, BAD, "option ttl must be from 0 to 2147483647"),
        ({"queue": "q", "options": {"leaseTime": "x", "ttl": -1}}, BAD, "option leaseTime must be an integer"),
    ],
)
def test_configure_refusals(body, error, message):
    """Each bad configure body is refused with its class, code and message."""
    assert refusal(configure_wire.parse_configure, body) == (*error, message)


def test_configure_parses_options_nested_and_flat():
    """Nested options win over flat ones; unknown names are dropped; null restores."""
    request = configure_wire.parse_configure(
        {
            "queue": "q",
            "namespace": "ns",
            "mode": "replace",
            "ttl": "ignored, options has ttl",
            "retryLimit": None,
            "colour": "blue",
            "options": {"ttl": 5, "minPopWaitTime": 10**6, "encryptionEnabled": True, "other": 1},
        }
    )
    assert request == queues.ConfigureRequest(
        name="q",
        namespace="ns",
        task=None,
        options=queues.QueueOptions(
            (("ttl", 5), ("retryLimit", None), ("minPopWaitTime", 60000), ("encryptionEnabled", True))
        ),
        replace=True,
    )
    assert configure_wire.parse_configure({"queue": "q"}) == queues.ConfigureRequest("q")


# -- push ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        ("nope", BAD, "the body must be a JSON object"),
        ({}, BAD, "items is required"),
        ({"items": "nope"}, BAD, "items must be an array"),
        ({"items": ["x"]}, BAD, "items[0] must be an object"),
        ({"items": [{"payload": 1}]}, BAD, "items[0].queue must be a non-empty string"),
        ({"items": [{"queue": "", "payload": 1}]}, BAD, "items[0].queue must be a non-empty string"),
        ({"items": [{"queue": 5, "payload": 1}]}, BAD, "items[0].queue must be a non-empty string"),
        ({"items": [{"queue": "q\x00", "payload": 1}]}, BAD, "items[0].queue must not contain NUL"),
        ({"items": [{"queue": LONG, "payload": 1}]}, TOO_LONG, "items[0].queue is over 511 bytes"),
        (
            {"items": [{"queue": "q", "partition": 3, "payload": 1}]},
            BAD,
            "items[0].partition must be a non-empty string",
        ),
        (
            {"items": [{"queue": "q", "partition": LONG, "payload": 1}]},
            TOO_LONG,
            "items[0].partition is over 511 bytes",
        ),
        ({"items": [{"queue": "q"}]}, BAD, "items[0].payload is required"),
        ({"items": [{"queue": "q", "payload": math.nan}]}, BAD, "items[0].payload is not JSON"),
        ({"items": [{"queue": "q", "payload": {1j}}]}, BAD, "items[0].payload is not JSON"),
        (
            {"items": [{"queue": "q", "payload": 1, "transactionId": 7}]},
            BAD,
            "items[0].transactionId must be a non-empty string",
        ),
        (
            {"items": [{"queue": "q", "payload": 1, "transactionId": ""}]},
            BAD,
            "items[0].transactionId must be a non-empty string",
        ),
        (
            {"items": [{"queue": "q", "payload": 1, "transactionId": "x" * 65536}]},
            BAD,
            "items[0].transactionId is over 65535 bytes",
        ),
        ({"items": [{"queue": "q", "payload": 1}, {"queue": "q"}]}, BAD, "items[1].payload is required"),
    ],
)
def test_push_refusals(body, error, message):
    """Each bad push body is refused; the message names the item."""
    assert refusal(wire.parse_push, body) == (*error, message)


def test_push_items_parse_to_typed_items():
    """Payloads become compact JSON text; partition defaults; bad trace ids are dropped."""
    items = wire.parse_push(
        {
            "items": [
                {"queue": "q", "payload": None, "traceId": "not-a-uuid"},
                {"queue": "q", "partition": "p", "payload": {"a": [1, "é"]}, "transactionId": "t", "traceId": UUID},
            ]
        }
    )
    assert items == [
        queues.PushItem("q", "Default", "null"),
        queues.PushItem("q", "p", '{"a":[1,"é"]}', "t", UUID),
    ]
    assert wire.parse_push({"items": []}) == []


@pytest.mark.parametrize(
    "payload",
    [{"n": 1, "pad": "x" * 60}, [1, 2.5, -0.0, True, None], "é\u2028\x1f", 2**70, 1e16, 1e-7, {"": {"a": []}}, 0.1],
)
def test_push_payloads_are_the_compact_json_of_the_value(payload):
    """The stored text reads back as the value, compact, as ``json_text`` writes it (but for how an exponent is spelled)."""
    [item] = wire.parse_push({"items": [{"queue": "q", "payload": payload}]})
    assert json.loads(item.payload_json) == payload
    assert item.payload_json.replace("e+", "e").replace("e-0", "e-") == json_text(payload).replace("e+", "e").replace(
        "e-0", "e-"
    )


def test_a_name_refused_after_the_same_name_passed_is_refused_with_its_index():
    """Names checked once per push still refuse at the item that carries them."""
    body = {"items": [{"queue": "q", "payload": 1}, {"queue": "q", "partition": "q\x00", "payload": 1}]}
    assert refusal(wire.parse_push, body) == (*BAD, "items[1].partition must not contain NUL")
    body = {"items": [{"queue": "q", "partition": "q", "payload": 1}, {"queue": 5, "payload": 1}]}
    assert refusal(wire.parse_push, body) == (*BAD, "items[1].queue must be a non-empty string")


# -- pop ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("params", "error", "message"),
    [
        ({"conflation": "maybe"}, BAD, "conflation must be true or false"),
        ({"conflation": "true"}, CONFLATION, wire.NO_GROUP_CONFLATION),
        ({"conflation": "true", "consumerGroup": "g", "autoAck": "true"}, CONFLATION, wire.AUTO_ACK_CONFLATION),
        ({"conflation": "1", "consumerGroup": "g", "commitOnDelivery": "1"}, CONFLATION, wire.AUTO_ACK_CONFLATION),
        # Conflation's refusals come before every other check.
        ({"conflation": "true", "batch": "0"}, CONFLATION, wire.NO_GROUP_CONFLATION),
        ({"autopilot": "maybe"}, BAD, "autopilot must be true or false"),
        ({"batch": "ten"}, BAD, "batch must be an integer"),
        ({"batch": "0"}, BAD, "batch must be at least 1"),
        ({"partitions": "0"}, BAD, "partitions must be from 1 to 64"),
        ({"timeout": "soon"}, BAD, "timeout must be an integer"),
        ({"leaseSeconds": "0"}, BAD, "leaseSeconds must be at least 1"),
        ({"subscriptionFrom": "yesterday"}, BAD, "subscriptionFrom must be an ISO time or now"),
        ({"subscriptionFrom": "2026-01-01T00:00:00"}, BAD, "subscriptionFrom must carry a time zone"),
        ({"autoAck": "x"}, BAD, "autoAck must be true or false"),
        ({"commitOnDelivery": "x"}, BAD, "commitOnDelivery must be true or false"),
        ({"consumerGroup": "g\x00"}, BAD, "consumerGroup must be a string"),
        ({"consumerGroup": LONG}, TOO_LONG, "consumerGroup is over 511 bytes"),
        ({"wait": "x"}, BAD, "wait must be true or false"),
        # The first bad parameter in the protocol's order answers.
        ({"wait": "x", "batch": "0"}, BAD, "batch must be at least 1"),
    ],
)
def test_pop_refusals(params, error, message):
    """Each bad pop parameter is refused, the first in protocol order answering."""
    assert refusal(wire.parse_pop_queue, params, "q") == (*error, message)


def test_conflation_refusals_come_before_the_path_and_discovery_checks():
    """A conflating pop with no group is refused before its names are checked."""
    assert refusal(wire.parse_pop_queue, {"conflation": "true"}, "", "p\x00") == (
        *CONFLATION,
        wire.NO_GROUP_CONFLATION,
    )
    assert refusal(wire.parse_pop_discovery, {"conflation": "true"}) == (*CONFLATION, wire.NO_GROUP_CONFLATION)


@pytest.mark.parametrize(
    ("params", "width"),
    [
        ({}, 64),
        ({"batch": "5"}, 5),
        ({"batch": "5", "partitions": "3"}, 3),
        ({"partitions": "1000"}, 64),
        ({"batch": "9999"}, 64),
        # Autopilot never sizes a conflating pop.
        ({"autopilot": "true", "batch": "7"}, 7),
    ],
)
def test_conflating_width_is_partitions_or_batch_clamped_to_64(params, width):
    """A conflating pop claims partitions ?? batch partitions, 1 to 64."""
    call = wire.parse_pop_queue({"conflation": "true", "consumerGroup": "g", **params}, "q")
    assert (call.request.conflation, call.request.conflation_width, call.autopilot) == (True, width, None)
    plain = wire.parse_pop_queue({"consumerGroup": "g"}, "q")
    assert plain.request.conflation is False


def test_conflation_keys_appear_only_when_true():
    """The answer's conflation and conflationConflict keys are there only when true."""
    assert wire.conflation_keys(False, False) == {}
    assert wire.conflation_keys(True, False) == {"conflation": True}
    assert wire.conflation_keys(False, True) == {"conflationConflict": True}
    call = wire.parse_pop_queue({"conflation": "true", "consumerGroup": "g"}, "q")
    assert wire.render_empty_pop(call, queues.ConflationPolicy(False, False)) is None
    assert wire.render_empty_pop(call, queues.ConflationPolicy(True, False)) == {
        "success": True,
        "queue": "q",
        "consumerGroup": "g",
        "partitionsClaimed": 0,
        "messages": [],
        "conflation": True,
    }


@pytest.mark.parametrize(
    ("parse", "args", "error", "message"),
    [
        (wire.parse_pop_queue, ({}, ""), BAD, "queue must be a non-empty string"),
        (wire.parse_pop_queue, ({}, LONG), TOO_LONG, "queue is over 511 bytes"),
        (wire.parse_pop_queue, ({}, "q", "p\x00"), BAD, "partition must not contain NUL"),
        # Path names are checked before the query.
        (wire.parse_pop_queue, ({"batch": "0"}, "q", LONG), TOO_LONG, "partition is over 511 bytes"),
        (wire.parse_pop_discovery, ({},), BAD, "namespace or task is required"),
        (wire.parse_pop_discovery, ({"namespace": "", "batch": "0"},), BAD, "namespace or task is required"),
    ],
)
def test_pop_target_refusals(parse, args, error, message):
    """Pop targets (path names, namespace or task) are checked before the query."""
    assert refusal(parse, *args) == (*error, message)


def test_pop_defaults_and_clamps():
    """Missing parameters take the defaults; batch, partitions and timeout are clamped."""
    call = wire.parse_pop_queue({}, "q")
    assert call == wire.PopCall(queues.PopRequest(queue="q"), wait=False, timeout_seconds=30.0)
    call = wire.parse_pop_queue({"batch": "20000", "partitions": "100", "timeout": "999999", "wait": "yes"}, "q", "p")
    assert call == wire.PopCall(
        queues.PopRequest(queue="q", partition="p", batch=10_000, max_partitions=64), wait=True, timeout_seconds=60.0
    )
    assert wire.parse_pop_queue({"timeout": "-5"}, "q").timeout_seconds == 0.0


def test_pop_parses_groups_subscriptions_and_auto_ack():
    """Group, subscription, lease and auto-ack parameters reach the PopRequest."""
    call = wire.parse_pop_discovery(
        {
            "namespace": "ns",
            "consumerGroup": "g",
            "subscriptionMode": "all",
            "subscriptionFrom": "2026-01-01T00:00:00Z",
            "leaseSeconds": "30",
            # autoAck says yes, so commitOnDelivery is not read.
            "autoAck": "TRUE",
            "commitOnDelivery": "x",
        }
    )
    assert call.request == queues.PopRequest(
        namespace="ns",
        group="g",
        lease_seconds=30,
        subscription_mode="all",
        subscription_from=datetime(2026, 1, 1, tzinfo=UTC),
        auto_ack=True,
    )
    assert wire.parse_pop_queue({"subscriptionFrom": "now", "consumerGroup": ""}, "q").request == queues.PopRequest(
        queue="q", group=queues.QUEUE_MODE, subscription_from="now"
    )
    assert wire.parse_pop_queue({"commitOnDelivery": "1"}, "q").request.auto_ack


def test_autopilot_fills_batch_and_partitions_and_is_echoed():
    """Autopilot fills what the query leaves out, and the choice is kept for the answer."""
    call = wire.parse_pop_queue({"autopilot": "true", "batch": "7"}, "q")
    assert call.autopilot == wire.Autopilot(7, wire.AUTOPILOT_PARTITIONS)
    assert (call.request.batch, call.request.max_partitions) == (7, wire.AUTOPILOT_PARTITIONS)
    assert wire.parse_pop_queue({}, "q").autopilot is None


# -- ack and lease --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        ([], BAD, "the body must be a JSON object"),
        ({}, BAD, "transactionId must be a non-empty string"),
        ({"transactionId": ""}, BAD, "transactionId must be a non-empty string"),
        ({"transactionId": "t"}, BAD, "partitionId must be a non-empty string"),
        ({"transactionId": "t", "partitionId": True}, BAD, "partitionId must be a non-empty string"),
        ({"transactionId": "t", "partitionId": "1", "status": 5}, BAD, "status must be a string"),
        ({"transactionId": "t", "partitionId": "1", "leaseId": 5}, BAD, "leaseId must be a string"),
        ({"transactionId": "t", "partitionId": "1", "consumerGroup": 5}, BAD, "consumerGroup must be a string"),
        (
            {"transactionId": "t", "partitionId": "1", "consumerGroup": LONG},
            TOO_LONG,
            "consumerGroup is over 511 bytes",
        ),
    ],
)
def test_ack_refusals(body, error, message):
    """Each bad acknowledgment is refused with its class, code and message."""
    assert refusal(wire.parse_ack, body) == (*error, message)


@pytest.mark.parametrize(
    ("body", "error", "message"),
    [
        (None, BAD, "the body must be a JSON object"),
        ({}, BAD, "acknowledgments must be an array"),
        ({"acknowledgments": {}}, BAD, "acknowledgments must be an array"),
        (
            {"acknowledgments": [{"transactionId": "t", "partitionId": "1"}, 5]},
            BAD,
            "acknowledgment 1 must be an object",
        ),
        ({"acknowledgments": [{"partitionId": "1"}]}, BAD, "transactionId must be a non-empty string"),
        (
            {"acknowledgments": [{"transactionId": "t", "partitionId": "1"}], "consumerGroup": 5},
            BAD,
            "consumerGroup must be a string",
        ),
    ],
)
def test_ack_batch_refusals(body, error, message):
    """A bad batch, or any bad item in it, refuses the whole batch."""
    assert refusal(wire.parse_ack_batch, body) == (*error, message)


def test_the_batch_group_is_checked_only_through_an_item_that_uses_it():
    """An item's own consumerGroup overrides the batch's, which is then never read."""
    assert wire.parse_ack_batch({"acknowledgments": [], "consumerGroup": 5}) == []
    (item,) = wire.parse_ack_batch(
        {"acknowledgments": [{"transactionId": "t", "partitionId": "1", "consumerGroup": "g"}], "consumerGroup": 5}
    )
    assert item.group == "g"


def test_ack_items_parse_to_typed_items():
    """Numeric partition ids become text, unknown statuses read as completed,
    a non-string error is kept as JSON, an empty lease id means unfenced."""
    (single,) = wire.parse_ack(
        {"transactionId": "t", "partitionId": 12, "status": "weird", "leaseId": "", "error": {"why": "x"}}
    )
    assert single == queues.AckItem(0, "t", "12", "completed", None, '{"why": "x"}', queues.QUEUE_MODE)
    items = wire.parse_ack_batch(
        {
            "consumerGroup": "g",
            "acknowledgments": [
                {"transactionId": "a", "partitionId": "1", "status": "failed", "leaseId": UUID, "error": "boom"},
                {"transactionId": "b", "partitionId": "1", "status": "dlq", "consumerGroup": "h"},
            ],
        }
    )
    assert items == [
        queues.AckItem(0, "a", "1", "failed", UUID, "boom", "g"),
        queues.AckItem(1, "b", "1", "dlq", None, None, "h"),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "the body must be a JSON object"),
        (False, "the body must be a JSON object"),
        ({"seconds": 0}, "seconds must be an integer of at least 1"),
        ({"seconds": "5"}, "seconds must be an integer of at least 1"),
        ({"seconds": True}, "seconds must be an integer of at least 1"),
        ({"seconds": 1.5}, "seconds must be an integer of at least 1"),
    ],
)
def test_lease_extend_refusals(body, message):
    """A lease extension needs an object body and whole seconds of at least 1."""
    assert refusal(wire.parse_lease_extend, body) == (*BAD, message)


def test_lease_extend_defaults_to_a_minute():
    """No body, an empty one or a null seconds extends by 60 s."""
    assert wire.parse_lease_extend(None) == 60
    assert wire.parse_lease_extend({}) == 60
    assert wire.parse_lease_extend({"seconds": None}) == 60
    assert wire.parse_lease_extend({"seconds": 5}) == 5


# -- resources and the DLQ ------------------------------------------------------------


def test_depth_group():
    """An empty group means "the slowest"; a named one is checked."""
    assert resources_wire.parse_depth_group({}) is None
    assert resources_wire.parse_depth_group({"group": ""}) is None
    assert resources_wire.parse_depth_group({"group": "g"}) == "g"
    assert refusal(resources_wire.parse_depth_group, {"group": "g\x00"}) == (*BAD, "consumerGroup must be a string")
    assert refusal(resources_wire.parse_depth_group, {"group": LONG}) == (*TOO_LONG, "consumerGroup is over 511 bytes")


def test_lanes_view():
    """Only stats=lanes asks for the short list."""
    assert resources_wire.wants_lanes({"stats": "lanes"})
    assert not resources_wire.wants_lanes({"stats": "full"})


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"limit": "0"}, "limit must be positive and offset not negative"),
        ({"offset": "-1"}, "limit must be positive and offset not negative"),
        ({"limit": "many"}, "limit must be an integer"),
        ({"offset": "1.5"}, "offset must be an integer"),
        ({"from": "last week"}, "from must be an ISO time"),
        ({"to": "2026-01-01T00:00:00"}, "to must carry a time zone"),
        ({"from": "2026-01-01T00:00:00", "to": "nope"}, "from must carry a time zone"),
    ],
)
def test_dlq_refusals(params, message):
    """Bad DLQ paging or times are refused, paging first."""
    assert refusal(resources_wire.parse_dlq, params) == (*BAD, message)


def test_dlq_query_defaults_and_caps():
    """The DLQ pages 100 by default and at most 1000; times are aware."""
    assert resources_wire.parse_dlq({}) == queues.DeadLetterQuery()
    assert resources_wire.parse_dlq(
        {
            "queue": "q",
            "consumerGroup": "g",
            "partition": "p",
            "from": "2026-01-01T00:00:00Z",
            "to": "2026-01-02T00:00:00+00:00",
            "limit": "5000",
            "offset": "10",
        }
    ) == queues.DeadLetterQuery(
        queue="q",
        group="g",
        partition="p",
        since=datetime(2026, 1, 1, tzinfo=UTC),
        until=datetime(2026, 1, 2, tzinfo=UTC),
        limit=1000,
        offset=10,
    )


@pytest.mark.parametrize(
    ("given", "mode"),
    [("new", "new"), ("new-only", "new"), ("NEW", "new"), ("all", "all"), ("from_beginning", "all"), ("x", "all")],
)
def test_subscription_mode_reads_new_and_new_only_as_new_and_anything_else_as_all(given, mode):
    """Queen's reading: a consume loop passing another value is never refused."""
    assert (
        wire.parse_pop_queue({"subscriptionMode": given, "consumerGroup": "g"}, "q").request.subscription_mode == mode
    )


def test_a_conflating_claim_carries_no_autopilot_echo():
    """Autopilot never sizes a conflating claim, so its answer does not say it did."""
    claim = queues.Claim("q", "l", "g", (), (), conflation=True, conflation_conflict=True)
    body = wire.render_claim(claim, wire.Autopilot(100, 4), 5)
    assert "autopilot" not in body
    assert (body["conflation"], body["conflationConflict"]) == (True, True)
    plain = wire.render_claim(queues.Claim("q", "l", "g", (), ()), wire.Autopilot(100, 4), 5)
    assert plain["autopilot"] == {"batch": 100, "partitions": 4, "waitMs": 5}

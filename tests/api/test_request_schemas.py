"""The published request schemas come from the same tables as the parsers.

``tests/api/test_schemathesis.py`` holds the document to the server under
every check; these pin what it found, in process and quickly.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.test import Client
from pydantic import TypeAdapter

from queenadmin.api.schemas.common import JsonbTime, MicrosZTime
from queenadmin.api.wire import queues as wire
from queenadmin.api.wire import resources
from queenadmin.api.wire.fields import FLAG_TEXT, Field, Param, Query, flag
from queenadmin.api.wire.messages import MAX_FETCH_ENTRIES, MAX_MESSAGES_OFFSET, MESSAGES
from queenadmin.domain import clock
from queenadmin.domain.kv import TXN_MAX_OPS
from queenadmin.domain.queues.options import BOOL_OPTIONS, INT_OPTIONS


def _components() -> dict:
    return Client().get("/api/v1/openapi.json").json()["components"]["schemas"]


def _pattern(annotated: object) -> str:
    return TypeAdapter(annotated).json_schema()["pattern"]


def test_queue_options_are_the_domains_table():
    """Every option the domain knows, with its kind; ``priority`` within its range."""
    options = _components()["QueueOptionsIn"]["properties"]
    assert set(options) == set(INT_OPTIONS) | set(BOOL_OPTIONS)
    assert options["priority"]["anyOf"][0] == {"maximum": 1000, "minimum": -1000, "type": "integer"}
    assert options["leaseTime"]["anyOf"][0] == {"maximum": 2**31 - 1, "minimum": 0, "type": "integer"}
    assert options["deadLetterQueue"]["anyOf"][0] == {"type": "boolean"}


def test_kv_operations_are_one_schema_per_op():
    """``op`` picks the fields: a put needs its value and one of ttlSeconds or forever."""
    components = _components()
    mapping = components["KVOpIn"]["discriminator"]["mapping"]
    assert set(mapping) == {"get", "getMany", "getPrefix", "put", "putIfAbsent", "delete", "incr", "check"}
    put = components["KVPutIn"]
    assert set(put["required"]) == {"op", "ns", "key", "value"}
    assert [branch["required"] for branch in put["anyOf"]] == [["ttlSeconds"], ["forever"]]
    assert "getPrefix" not in components["KVTxnOpIn"]["discriminator"]["mapping"]


def test_times_before_year_1000_keep_four_digits():
    """Schemathesis seeked a group to 0197-02-12: the answer said 197-02-12, off its own schema."""
    moment = datetime(197, 2, 12, 4, 17, 15, 500, tzinfo=UTC)
    assert clock.iso_micros_z(moment) == "0197-02-12T04:17:15.000500Z"
    assert clock.iso_jsonb(moment) == "0197-02-12T04:17:15.0005+00:00"
    assert re.match(_pattern(MicrosZTime), clock.iso_micros_z(moment) or "")
    assert re.match(_pattern(JsonbTime), clock.iso_jsonb(moment) or "")


def test_streams_bodies_say_what_their_parsers_read():
    """Schemathesis found the streams models off their parsers: the document
    now says an ack's count is never null, that an empty query_id is
    refused, and that a false ``keys`` reads as none (Queen's ``or []``)."""
    components = Client().get("/streams/v1/openapi.json").json()["components"]["schemas"]
    ack = components["CycleAckIn"]
    assert ack["properties"]["count"] == {"type": "integer", "minimum": 0, "description": "a whole number"}
    assert ack["required"] == ["transactionId", "leaseId"]
    cycle = components["CycleIn"]
    assert cycle["properties"]["query_id"]["minLength"] == 1
    assert cycle["properties"]["ack"]["anyOf"][0]["$ref"] == "#/components/schemas/CycleAckIn"
    keys = components["StateGetIn"]["properties"]["keys"]["anyOf"]
    assert keys[1] == {"enum": [None, False, 0, "", [], {}]}


def test_a_transaction_names_the_kv_and_timer_declarations():
    """TxnIn's kv and timers are the declarations their parsers read."""
    body = _components()["TxnIn"]["properties"]
    assert body["kv"]["anyOf"][0]["items"] == {"$ref": "#/components/schemas/KVTxnOpIn"}
    assert body["timers"]["anyOf"][0]["items"] == {"$ref": "#/components/schemas/TimerOpIn"}
    assert body["kv"]["anyOf"][0]["maxItems"] == TXN_MAX_OPS


def _query_parameters(path: str) -> dict:
    operation = Client().get("/api/v1/openapi.json").json()["paths"][path]["get"]
    return {p["name"]: p for p in operation["parameters"] if p["in"] == "query"}


def test_status_reads_publish_every_query_parameter_they_read():
    """The status reads' parameters are declared once (``wire.status``): the
    document lists each the parser reads, with its bounds; empty is absent."""
    assert list(_query_parameters("/api/v1/status")) == ["to", "from", "queue", "namespace", "task"]
    page = _query_parameters("/api/v1/status/queues")
    assert page["limit"]["schema"]["anyOf"] == [{"minimum": 1, "type": "integer"}, {"const": ""}]
    assert page["offset"]["schema"]["anyOf"][0] == {"minimum": 0, "type": "integer"}
    interval = _query_parameters("/api/v1/status/analytics")["interval"]["schema"]
    assert interval["anyOf"][0]["enum"] == ["minute", "hour", "day"]
    assert interval["default"] == "hour"
    assert list(_query_parameters("/api/v1/analytics/system-metrics")) == ["to", "from", "hostname", "workerId"]
    assert _query_parameters("/api/v1/analytics/worker-metrics")["from"]["schema"]["anyOf"][0]["format"] == "date-time"


def test_the_ephemeral_pop_publishes_every_query_parameter_it_reads():
    """Only ``queue`` was published before; ``partition`` sent empty is refused, ``group`` empty is queue mode."""
    params = _query_parameters("/api/v1/ephemeral/pop")
    assert list(params) == ["queue", "partition", "group", "batch", "wait", "timeout", "autoAck"]
    assert params["queue"]["required"]
    assert not params["partition"]["required"]
    assert params["partition"]["schema"]["minLength"] == 1
    assert params["group"]["schema"]["anyOf"][1] == {"const": ""}
    assert params["batch"]["schema"]["anyOf"][0] == {"maximum": 10_000, "minimum": 1, "type": "integer"}
    assert params["timeout"]["schema"]["anyOf"][0] == {"maximum": 300_000, "minimum": 0, "type": "integer"}
    assert params["wait"]["schema"]["anyOf"][0] == {"type": "boolean"}


def test_a_query_parameter_is_read_and_published_from_one_declaration():
    """``fields.Param``: text read as the field's kind, then the field's checks;
    an empty parameter reads as absent (a string's with ``falsy_is_absent``)."""

    def bad(reason: str, detail: str) -> ValueError:
        return ValueError(detail)

    query = Query(
        {
            "n": Param(Field("integer", ge=1, default=5, rule="1 or more"), "a number"),
            "on": Param(Field("boolean", default=False), "true or false"),
            "name": Param(Field("string", missing="", min_length=1, refusal="name must be a non-empty string")),
        }
    )
    assert query.read({"n": "", "name": "x"}, bad) == {"n": 5, "on": False, "name": "x"}
    assert query.read({"n": "7", "on": "true", "name": "x"}, bad) == {"n": 7, "on": True, "name": "x"}
    for params, detail in (
        ({"n": "x", "name": "x"}, "n must be a number"),
        ({"n": "0", "name": "x"}, "n must be 1 or more"),
        ({"on": "yes", "name": "x"}, "on must be true or false"),
        ({"name": ""}, "name must be a non-empty string"),
        ({}, "name must be a non-empty string"),
    ):
        with pytest.raises(ValueError, match=detail):
            query.read(params, bad)
    schemas = query.schemas()
    assert schemas["n"] == {
        "anyOf": [{"minimum": 1, "type": "integer"}, {"const": ""}],
        "default": 5,
        "description": "1 or more",
        "required": False,
    }
    assert schemas["name"] == {"minLength": 1, "type": "string", "required": True}


def test_message_routes_publish_the_declarations_their_parsers_read():
    """The offset reads' bodies and the message log's query strings come
    from wire/messages.py: the bounds the parsers hold are the document's."""
    document = Client().get("/api/v1/openapi.json").json()
    components = document["components"]["schemas"]
    entries = components["FetchIn"]["properties"]["entries"]
    assert (entries["minItems"], entries["maxItems"]) == (1, MAX_FETCH_ENTRIES)
    assert entries["items"] == {"$ref": "#/components/schemas/FetchEntryIn"}
    assert components["ChangedEntryIn"]["required"] == ["queue"]
    assert components["TraceIn"]["required"] == ["transactionId", "partitionId", "data"]
    query = {p["name"]: p["schema"] for p in document["paths"]["/api/v1/messages"]["get"]["parameters"]}
    assert set(query) == set(MESSAGES.params)
    assert query["offset"]["anyOf"] == [
        {"maximum": MAX_MESSAGES_OFFSET, "minimum": 0, "type": "integer"},
        {"const": ""},
    ]
    delete = document["paths"]["/api/v1/consumer-groups/{group}"]["delete"]["parameters"]
    assert [p["schema"]["pattern"] for p in delete if p["name"] == "deleteMetadata"] == [FLAG_TEXT]


def test_a_query_parameter_reads_as_it_is_published():
    """Empty is absent; an integer is refused below its minimum or above its
    maximum and clamped to its cap; a flag is true/1 or false/0 in any case."""

    def bad(reason, detail):
        return ValueError(detail)

    limit = Field("integer", default=5, ge=1, le=200, refusal="limit must be at least 1", too_high="limit: 200 at most")
    page = Query({"limit": Param(limit, "an integer", cap=10), "flag": flag(default=True)})
    assert page.read({"limit": "", "flag": ""}, bad) == {"limit": 5, "flag": True}
    assert page.read({"limit": "99", "flag": "FALSE"}, bad) == {"limit": 10, "flag": False}
    for params, detail in [
        ({"limit": "0"}, "limit must be at least 1"),
        ({"limit": "201"}, "limit: 200 at most"),
        ({"limit": "x"}, "limit must be an integer"),
        ({"flag": "yes"}, "flag must be true or false"),
    ]:
        with pytest.raises(ValueError, match=detail):
            page.read(params, bad)
    assert [bool(re.fullmatch(FLAG_TEXT, text)) for text in ("True", "0", "", "yes")] == [True, True, True, False]


def test_queue_bodies_and_queries_are_their_parsers_declarations():
    """The message log's bodies are wire.queues' declarations, and the pop and
    DLQ query parameters the parsers read are published with their bounds."""
    document = Client().get("/api/v1/openapi.json").json()
    components = document["components"]["schemas"]
    assert components["AckIn"] == wire.ACK.schema()
    assert components["PushItemIn"]["required"] == ["queue", "payload"]
    assert components["TxnOperationIn"]["discriminator"]["propertyName"] == "type"
    assert components["LeaseExtendIn"]["properties"]["seconds"]["anyOf"][0]["maximum"] == wire.MAX_LEASE_SECONDS

    def query(path: str) -> dict:
        listed = document["paths"][path]["get"]["parameters"]
        return {p["name"]: p["schema"] for p in listed if p["in"] == "query"}

    pop = query("/api/v1/pop/queue/{queue}")
    assert set(pop) == {*wire.POP.params, "delivery"}
    assert pop["leaseSeconds"]["anyOf"][0] == {"type": "integer", "minimum": 1, "maximum": wire.MAX_LEASE_SECONDS}
    assert set(pop["delivery"]["properties"]) == {"consumerGroup", "conflation", "autoAck", "commitOnDelivery"}
    assert set(query("/api/v1/pop")) == {*wire.POP.params, "delivery", "selection"}
    dlq = query("/api/v1/dlq")
    assert set(dlq) == set(resources.DLQ.params)
    assert dlq["limit"]["anyOf"][0] == {"type": "integer", "minimum": 1}


def test_the_document_is_made_once_a_prefix_and_again_when_a_setting_changes(monkeypatch, settings):
    """``/api/v1/openapi.json`` is kept per path prefix (it follows from the
    code and the settings); each caller gets its own copy; a changed setting
    (a test's override) makes it again."""
    from ninja import NinjaAPI

    from queenadmin.api import api

    made: list[str | None] = []
    make = NinjaAPI.get_openapi_schema

    def counted(self: NinjaAPI, **kwargs: object) -> object:
        made.append(kwargs.get("path_prefix"))  # type: ignore[arg-type]
        return make(self, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(NinjaAPI, "get_openapi_schema", counted)
    api.documents.clear()
    first = Client().get("/api/v1/openapi.json")
    second = Client().get("/api/v1/openapi.json")
    assert first.status_code == second.status_code == 200
    assert first.content == second.content
    assert made == ["/api/v1/"]
    mine = api.get_openapi_schema(path_prefix="/api/v1/")
    mine["paths"].clear()
    assert api.get_openapi_schema(path_prefix="/api/v1/")["paths"]
    assert made == ["/api/v1/"]
    settings.QUEENADMIN_KV_MAX_KEYS_PER_CALL = 7
    assert Client().get("/api/v1/openapi.json").status_code == 200
    assert made == ["/api/v1/", "/api/v1/"]

"""The published request schemas come from the same tables as the parsers.

``tests/api/test_schemathesis.py`` holds the document to the server under
every check; these pin what it found, in process and quickly.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from django.test import Client
from pydantic import TypeAdapter

from queenadmin.api.schemas.common import JsonbTime, MicrosZTime
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

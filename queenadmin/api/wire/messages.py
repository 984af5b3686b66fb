"""The client's remaining routes: offset reads, discovery, consumer groups,
traces and the operator reads (``queen.admin``), parsed and rendered.

Shapes follow Queen: the offset reads as the 2.6 client reads them
(``queen/reads/offset_reads.py``), the rest as Queen's stored procedures
answer (``lib/schema/procedures/008_consumer_groups.sql``, ``010_messages``,
``011_traces``). Refusals are ``InvalidArgument`` (400, engine envelope).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from functools import partial
from typing import Any, get_args

from queenadmin.api.wire.fields import NO_NUL, TEXT, Field, Op, Param, Query, flag
from queenadmin.api.wire.queues import (
    GROUP,
    MAX_NAME_BYTES,
    NAME_DOC,
    Params,
    check_group,
    check_name,
    check_text,
    engine_bad,
    json_object,
    name_field,
)
from queenadmin.api.wire.queues import lookup_group as check_lookup_group
from queenadmin.domain import names
from queenadmin.domain.queues import browse, reads
from queenadmin.domain.queues import operator as queue_operator
from queenadmin.errors import InvalidArgument, MessageNotFound
from queenadmin.plumbing.db import json_text

#: The broker refuses more than this many entries in one call.
MAX_FETCH_ENTRIES = 1024
#: Bytes of payload one entry (and one call) may read at most.
MAX_FETCH_BYTES = 8 * 1024 * 1024
MAX_CHANGED_PAGE = 1000
MAX_PAGE = 1000
DEFAULT_MESSAGES_PAGE = 200
MAX_OFFSET = 1_000_000_000
MAX_MESSAGES_OFFSET = 100_000


def _item(op: Op, raw: Any, where: str) -> dict[str, Any]:
    """The fields of one item of an array: every refusal's detail starts with ``where``."""
    if not isinstance(raw, dict):
        raise InvalidArgument(f"{where} must be an object")
    try:
        return op.read(raw, engine_bad)
    except InvalidArgument as exc:
        raise type(exc)(f"{where}.{exc.detail}") from None


def _iso(raw: Any, name: str) -> datetime:
    if not isinstance(raw, str) or not raw:
        raise InvalidArgument(f"{name} must be an ISO-8601 time")
    try:
        moment = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(f"{name} must be an ISO-8601 time") from None
    # A time with no offset is UTC, as the broker reads it.
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidArgument(f"{name} is out of range") from None


# --------------------------------------------------------------------------
# The fields of each body and query string, declared once: the parsers below
# read them and the document shows them (``openapi.body_of``,
# ``openapi.parameters``). Every refusal is the engine's 400 ``bad_request``
# (413 for a name over the key budget), so no reason codes.

#: A time ``datetime.fromisoformat`` reads; one without an offset is UTC.
_TIME = {"format": "date-time"}


def _count(what: str, minimum: int, doc: str, default: int | None = None) -> Field:
    refusal = f"{what} must be an integer of at least {minimum}"
    return Field("integer", ge=minimum, default=default, null_is_bad=True, refusal=refusal, doc=doc)


def _time(what: str, **given: Any) -> Field:
    check = partial(_iso, name=what)
    return Field("string", rule="an ISO-8601 time", check=check, schema_extra=_TIME, **given)


def _entries(of: Op) -> Field:
    def check(entries: list[Any]) -> list[Any]:
        if not entries:
            raise InvalidArgument("entries must be a non-empty array")
        if len(entries) > MAX_FETCH_ENTRIES:
            raise InvalidArgument(f"at most {MAX_FETCH_ENTRIES} entries per call")
        return entries

    items = {"minItems": 1, "maxItems": MAX_FETCH_ENTRIES}
    return Field(
        "array", missing="", refusal="entries must be a non-empty array", check=check, of=of, schema_extra=items
    )


_NO_CURSOR = "after must be a cursor this route answered"


def _cursor(raw: str) -> int:
    found = path_id(raw)
    if found is None:
        raise InvalidArgument(_NO_CURSOR)
    return found


FETCH_ENTRY = Op(
    "FetchEntryIn",
    {
        "queue": name_field("queue"),
        "partition": name_field("partition"),
        "offset": _count("offset", 0, "next offset to read (from 0); below the log start: OFFSET_OUT_OF_RANGE", 0),
        "maxBytes": _count("maxBytes", 1, f"payload bytes this entry may read (at most {MAX_FETCH_BYTES})"),
    },
    tenant_free=False,
)
_CALL_BYTES = f"payload bytes the call may read (at most {MAX_FETCH_BYTES}); each entry's default"
FETCH = Op(
    "FetchIn",
    {"entries": _entries(FETCH_ENTRY), "maxBytes": _count("maxBytes", 1, _CALL_BYTES, MAX_FETCH_BYTES)},
    tenant_free=False,
)
_AFTER = Field("string", pattern="^[0-9]{1,18}$", refusal=_NO_CURSOR, check=_cursor)
CHANGED_ENTRY = Op(
    "ChangedEntryIn",
    # In the order Queen's broker checks them.
    {
        "after": replace(_AFTER, doc="the page cursor a previous answer gave as next"),
        "limit": _count("limit", 1, f"clamped to {MAX_CHANGED_PAGE}", MAX_CHANGED_PAGE),
        "queue": name_field("queue"),
        "since": _time("since", doc="ISO-8601; none lists every partition"),
    },
    tenant_free=False,
)
CHANGED = Op("ChangedIn", {"entries": _entries(CHANGED_ENTRY)}, tenant_free=False)
SUBSCRIPTION = Op(
    "SubscriptionIn",
    {"subscriptionTimestamp": _time("subscriptionTimestamp", missing="", null_is_bad=True)},
    tenant_free=False,
)
_SEEK_TARGETS = [
    {"required": ["toEnd"], "properties": {"toEnd": {"const": True}}},
    {"required": ["timestamp"], "properties": {"toEnd": {"const": False}, "timestamp": {"type": "string", **_TIME}}},
]
SEEK = Op(
    "SeekIn",
    {
        "toEnd": Field("boolean", default=False, null_is_bad=True, refusal="toEnd must be true or false"),
        "timestamp": Field("any", doc="ISO-8601: where to move the group's cursors; ignored with toEnd"),
    },
    doc="Either ``toEnd: true`` or a ``timestamp``.",
    extra={"anyOf": _SEEK_TARGETS},
    tenant_free=False,
)


def _trace_names(raw: str | list[Any]) -> list[str]:
    if isinstance(raw, str):
        raw = [raw]
    if not all(isinstance(n, str) for n in raw):
        raise InvalidArgument("traceNames must be a string or an array of strings")
    return [check_name(n, "traceNames[]") for n in raw if n]


_ID = Field("string", missing="", min_length=1, refusal="transactionId and partitionId are required")
_TRACE_NAME = {"type": "string", "maxLength": MAX_NAME_BYTES, "pattern": names.SCHEMA_PATTERN_OR_EMPTY}
TRACE = Op(
    "TraceIn",
    {
        "transactionId": _ID,
        "partitionId": replace(_ID, doc="a partition id; one that names none answers 404"),
        "data": Field("any", missing="", null_is_bad=True, refusal="data is required", doc="any JSON value, null too"),
        "traceNames": Field(
            ("array", "string"),
            default=[],
            refusal="traceNames must be a string or an array of strings",
            check=_trace_names,
            doc="names to find the trace by; empty ones are skipped",
            schema_extra={"items": _TRACE_NAME, **{k: v for k, v in _TRACE_NAME.items() if k != "type"}},
        ),
        # Checked before the default: false or {} is not a missing type.
        "eventType": Field("string", refusal="eventType must be a string", doc='default "info"'),
        "consumerGroup": GROUP,
    },
    tenant_free=False,
)
_OPTIONAL = {"type": ["object", "null"]}
MOVE_TO_DLQ = Op(
    "MoveToDlqIn",
    {"error": Field("string", refusal="error must be a string"), "consumerGroup": GROUP},
    doc="Optional: no body or ``null`` is queue mode and no error text.",
    extra=_OPTIONAL,
    tenant_free=False,
)
_REASON = "why, kept in the audit trail (ours, not Queen's)"
REPLAY = Op(
    "DLQReplayIn",
    {
        "reason": Field("string", pattern=NO_NUL, refusal="reason must be a string", doc=_REASON),
        "queue": name_field(
            "queue", missing=None, doc="the destination queue (created if missing); default its own; " + NAME_DOC
        ),
        "partition": name_field(
            "partition", missing=None, doc="the destination partition; default its own; " + NAME_DOC
        ),
    },
    doc="Optional: no body or ``null`` replays into the dead letter's own queue and partition.",
    extra=_OPTIONAL,
    tenant_free=False,
)


def _number(name: str, default: int, ge: int, cap: int | None = None, **more: Any) -> Param:
    field = Field("integer", default=default, ge=ge, refusal=f"{name} must be at least {ge}", **more)
    return Param(field, "an integer", cap=cap)


def _page(default: int) -> dict[str, Param]:
    # An offset past any real list answers an empty page; the cap keeps it
    # inside the databases' integers.
    return {"limit": _number("limit", default, 1, MAX_PAGE), "offset": _number("offset", 0, 0, MAX_OFFSET)}


def _text(doc: str = "empty: any", **more: Any) -> Param:
    return Param(replace(TEXT.field, doc=doc, **more))


_TEXT = _text()
LAGGING = Query({"minLagSeconds": _number("minLagSeconds", 3600, 0)})
GROUP_DELETE = Query({"deleteMetadata": flag(default=True, doc="false keeps the group's metadata: it rewinds")})
TRACE_NAMES = Query(_page(50))
TRACES_BY_NAME = Query(_page(100))
PARTITIONS = Query({**_page(100), "queue": _TEXT})
_STATUS = Param(
    Field(
        "string",
        choices=get_args(browse.MessageStatus),
        falsy_is_absent=True,
        refusal="status must be pending, processing, completed or dead_letter",
    )
)
#: An offset is read past, row by row: narrow the time window with from/to instead.
_TOO_FAR = f"offset must be at most {MAX_MESSAGES_OFFSET} (narrow the time window with from and to)"
MESSAGES = Query(
    {
        "status": _STATUS,
        "limit": _number("limit", DEFAULT_MESSAGES_PAGE, 1, MAX_PAGE),
        "offset": _number("offset", 0, 0, le=MAX_MESSAGES_OFFSET, too_high=_TOO_FAR),
        "from": _text("ISO-8601", check=partial(_iso, name="from"), schema_extra=_TIME),
        "to": _text("ISO-8601", check=partial(_iso, name="to"), schema_extra=_TIME),
        "queue": _TEXT,
        "partition": _TEXT,
        # Queen's console sends ``ns``; the client forwards what it is given.
        "ns": _TEXT,
        "namespace": _text("read when ns is empty"),
        "task": _TEXT,
    }
)


def read_query(params: Params, query: Query) -> dict[str, Any]:
    """The parameters ``query`` declares, read from ``params``."""
    return query.read(params, engine_bad)


def path_id(raw: str) -> int | None:
    """The id a path names (a partition's, a dead letter's); None when it
    cannot name one (a BIGINT has at most 18 digits here)."""
    return int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else None


def partition_id(raw: str) -> int:
    """A partition id from a path; one that names no partition is a 404."""
    found = path_id(raw)
    if found is None:
        raise MessageNotFound()
    return found


# --------------------------------------------------------------------------
# Offset reads


def parse_fetch(body: Any) -> tuple[list[reads.FetchEntry], int]:
    fields = FETCH.read(json_object(body), engine_bad)
    call_bytes = min(fields["maxBytes"], MAX_FETCH_BYTES)
    parsed = []
    for i, raw in enumerate(fields["entries"]):
        entry = _item(FETCH_ENTRY, raw, f"entries[{i}]")
        max_bytes = call_bytes if entry["maxBytes"] is None else min(entry["maxBytes"], MAX_FETCH_BYTES)
        parsed.append(reads.FetchEntry(entry["queue"], entry["partition"], entry["offset"], max_bytes))
    return parsed, call_bytes


def parse_changed(body: Any) -> list[reads.ChangedQuery]:
    parsed = []
    for i, raw in enumerate(CHANGED.read(json_object(body), engine_bad)["entries"]):
        entry = _item(CHANGED_ENTRY, raw, f"entries[{i}]")
        parsed.append(reads.ChangedQuery(**{**entry, "limit": min(entry["limit"], MAX_CHANGED_PAGE)}))
    return parsed


# --------------------------------------------------------------------------
# Consumer groups


def parse_queue(raw: str) -> str:
    return check_name(raw, "queue")


def parse_group(raw: str) -> str:
    group = check_group(raw)
    if not raw:
        raise InvalidArgument("consumer group must be a non-empty string")
    return group


def lookup_queue(raw: str) -> str:
    """A queue to look up or delete: a name stored before the rule of
    stored names (``domain.names``) is still found."""
    if not raw:
        raise InvalidArgument("queue must be a non-empty string")
    return check_text(raw, "queue")  # type: ignore[no-any-return]


def lookup_group(raw: str) -> str:
    """``parse_group`` for a group to look up or delete (``lookup_queue``)."""
    if not raw:
        raise InvalidArgument("consumer group must be a non-empty string")
    return check_lookup_group(raw)


def parse_subscription(body: Any) -> datetime:
    body = json_object(body)
    if "subscriptionTimestamp" not in body:
        raise InvalidArgument("Missing subscriptionTimestamp in request body")
    return SUBSCRIPTION.read(body, engine_bad)["subscriptionTimestamp"]  # type: ignore[no-any-return]


def parse_seek(body: Any) -> tuple[bool, datetime | None]:
    fields = SEEK.read(json_object(body) if body is not None else {}, engine_bad)
    to_end, raw = fields["toEnd"], fields["timestamp"]
    if not to_end and not raw:
        raise InvalidArgument("Must specify either 'toEnd': true or 'timestamp'")
    return to_end, None if to_end else _iso(raw, "timestamp")


# --------------------------------------------------------------------------
# Traces


def parse_trace(body: Any) -> dict[str, Any]:
    """``POST /traces``: the keyword arguments of ``traces.trace_record``."""
    fields = TRACE.read(json_object(body), engine_bad)
    return {
        "partition_id": partition_id(fields["partitionId"]),
        "transaction_id": fields["transactionId"],
        "group": fields["consumerGroup"],
        "event_type": fields["eventType"] or "info",
        "data_json": json_text(fields["data"]),
        "names": fields["traceNames"],
    }


# --------------------------------------------------------------------------
# Messages


def parse_messages(params: Params) -> browse.MessageQuery:
    fields = read_query(params, MESSAGES)
    return browse.MessageQuery(
        queue=fields["queue"],
        partition=fields["partition"],
        namespace=fields["ns"] or fields["namespace"],
        task=fields["task"],
        status=fields["status"],
        since=fields["from"],
        until=fields["to"],
        limit=fields["limit"],
        offset=fields["offset"],
    )


def parse_move_to_dlq(body: Any) -> tuple[str, str | None]:
    """``POST /messages/{pid}/{txid}/dlq``: the group (default queue mode) and an error text."""
    fields = MOVE_TO_DLQ.read({} if body is None else json_object(body), engine_bad)
    return fields["consumerGroup"], fields["error"]


# --------------------------------------------------------------------------
# Queen's DLQ replay


def parse_replay(body: Any) -> tuple[queue_operator.ReplayDestination, str]:
    """``POST /dlq/{id}/replay``: the destination (no body, ``null`` or an
    absent field: the dead letter's own queue or partition) and the reason
    its audit entry keeps."""
    fields = REPLAY.read({} if body is None else json_object(body), engine_bad)
    destination = queue_operator.ReplayDestination(queue=fields["queue"], partition=fields["partition"])
    return destination, check_text(fields["reason"] or "", "reason")

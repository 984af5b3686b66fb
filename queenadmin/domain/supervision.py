"""Consumer heartbeats: what the official client's ``supervision()`` publishes.

queen-mq 2.6.0 (``queen/consumer/supervision.py``) has each supervised
``consume`` write two KV keys in one call, every 10 s and once more with
state ``stopped`` when it ends, each with a TTL of 60 s, in namespace
``queen-supervisor``:

- ``<application>/<instance id>/head``: ``{"format":
  "queen.supervisor.remote-status/v1", "write": <hex>, "chunks": 1,
  "bytes": <length>}``;
- ``<application>/<instance id>/chunk/0000``: ``{"write": <the same hex>,
  "index": 0, "data": <base64 of the status document>}``.

The document (UTF-8 JSON, ``"schema": "queen.consumer.status/v1"``) names
the process (``instance_id``, ``hostname``, ``pid``, ``state``,
``updated_at_epoch``, ``started_at_epoch``, ``configuration.
heartbeat_timeout``: 30) and one pool per ``consume`` in ``pool_status``
(``queue``, ``namespace``, ``task``, ``consumer_group``, ``desired``
(the concurrency), ``running``, ``busy``, ``completed``, ``failed``,
``last_completed_at_epoch``, ``oldest_inflight_seconds``). Chunks other
than 0000 follow the same shape (``index`` counting up), so a document of
several is read too.

Anything may be stored under that namespace, so every field is checked: a
heartbeat that does not parse is kept, marked ``malformed`` with the
reason, never an exception. Its last beat is when the server stored the
head (``updated_at``), not the client's clock; it is stale once older than
the document's heartbeat timeout (three intervals) or past its TTL.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from queenadmin.domain.kv import MAX_PAGE_LIMIT, ScannedKey, kv_scan_stored

#: The KV namespace the client writes.
NAMESPACE = "queen-supervisor"
FORMAT = "queen.supervisor.remote-status/v1"
SCHEMA = "queen.consumer.status/v1"
#: The client's interval between heartbeats.
INTERVAL = timedelta(seconds=10)
#: Stale after this without a beat when the document does not say (three intervals).
DEFAULT_TIMEOUT = timedelta(seconds=30)
#: Chunks of one document read at most.
MAX_CHUNKS = 64
#: Decoded document bytes read at most (the client refuses past 45,000).
MAX_DOCUMENT_BYTES = 1_000_000
#: KV rows read at most: one page, so the read is one statement; each
#: consumer process has two, so up to 500 processes are shown.
MAX_ROWS = MAX_PAGE_LIMIT

State = Literal["running", "stopped", "stale", "expired", "malformed"]


@dataclass(frozen=True)
class Pool:
    """One ``consume`` of a consumer process, as its heartbeat says."""

    queue: str | None
    namespace: str | None
    task: str | None
    #: The consumer group; ``__QUEUE_MODE__`` for queue mode.
    group: str
    #: The concurrency asked for (``desired``) and the workers running and busy.
    concurrency: int | None
    running: int | None
    busy: int | None
    completed: int | None
    failed: int | None
    last_completed_at: datetime | None
    oldest_inflight_seconds: int | None


@dataclass(frozen=True)
class Heartbeat:
    """One consumer process's last heartbeat (or what could be read of it)."""

    #: The application (supervision's ``group``): the key's first segment.
    application: str
    #: The key's slot, ``<application>/<instance id>``.
    slot: str
    state: State
    #: When the server stored the head (None: no head).
    last_beat: datetime | None
    expires_at: datetime | None
    #: Why a ``malformed`` heartbeat could not be read ("" otherwise).
    problem: str = ""
    hostname: str | None = None
    pid: int | None = None
    #: The state the document says (``running``, ``stopped``), if read.
    reported: str | None = None
    started_at: datetime | None = None
    timeout: timedelta = DEFAULT_TIMEOUT
    pools: tuple[Pool, ...] = field(default_factory=tuple)

    @property
    def fresh(self) -> bool:
        """Running and beating: it counts as a reader of its queues."""
        return self.state == "running"

    @property
    def stale_at(self) -> datetime | None:
        """When a fresh heartbeat goes stale with no new beat."""
        if self.last_beat is None:
            return None
        ends = [self.last_beat + self.timeout]
        if self.expires_at is not None:
            ends.append(self.expires_at)
        return min(ends)


@dataclass(frozen=True)
class Heartbeats:
    """Every heartbeat read, by slot, and whether the read stopped at its cap."""

    beats: tuple[Heartbeat, ...]
    truncated: bool


class _Malformed(ValueError):
    """A heartbeat that does not parse; the message says why."""


def _text(value: Any, what: str, *, optional: bool = True) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise _Malformed(f"{what} is not text")
    try:
        value.encode()
    except UnicodeEncodeError as exc:
        # A lone surrogate (JSON's "\ud800"): no page could be written with it.
        raise _Malformed(f"{what} is not text") from exc
    return value


def _count(value: Any, what: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _Malformed(f"{what} is not a count")
    return value


def _epoch(value: Any, what: str) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Malformed(f"{what} is not a time")
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise _Malformed(f"{what} is out of range") from exc


def _pool(raw: Any) -> Pool:
    if not isinstance(raw, dict):
        raise _Malformed("a pool_status entry is not an object")
    group = _text(raw.get("consumer_group"), "consumer_group") or "__QUEUE_MODE__"
    return Pool(
        queue=_text(raw.get("queue"), "queue") or None,
        namespace=_text(raw.get("namespace"), "namespace") or None,
        task=_text(raw.get("task"), "task") or None,
        group=group,
        concurrency=_count(raw.get("desired"), "desired"),
        running=_count(raw.get("running"), "running"),
        busy=_count(raw.get("busy"), "busy"),
        completed=_count(raw.get("completed"), "completed"),
        failed=_count(raw.get("failed"), "failed"),
        last_completed_at=_epoch(raw.get("last_completed_at_epoch"), "last_completed_at_epoch"),
        oldest_inflight_seconds=_count(raw.get("oldest_inflight_seconds"), "oldest_inflight_seconds"),
    )


@dataclass(frozen=True)
class _Row:
    """A KV row of the namespace, its value parsed."""

    value: Any
    updated_at: datetime
    expires_at: datetime | None


def _row(scanned: ScannedKey) -> _Row:
    return _Row(json.loads(scanned.value_json), scanned.updated_at, scanned.expires_at)


def _document(head: _Row, chunks: dict[str, _Row]) -> dict[str, Any]:
    """The status document a head and its chunks hold, or ``_Malformed``."""
    value = head.value
    if not isinstance(value, dict):
        raise _Malformed("the head is not an object")
    if value.get("format") != FORMAT:
        raise _Malformed(f"the head's format is not {FORMAT}")
    write, count, size = value.get("write"), value.get("chunks"), value.get("bytes")
    if not isinstance(write, str) or not write:
        raise _Malformed("the head names no write")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_CHUNKS:
        raise _Malformed(f"the head's chunks is not a count from 1 to {MAX_CHUNKS}")
    if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= MAX_DOCUMENT_BYTES:
        raise _Malformed("the head's bytes is not a size")
    data = b""
    for index in range(count):
        chunk = chunks.get(f"{index:04d}")
        if chunk is None:
            raise _Malformed(f"chunk {index:04d} is missing")
        body = chunk.value
        if not isinstance(body, dict) or body.get("write") != write or body.get("index") != index:
            raise _Malformed(f"chunk {index:04d} belongs to another write")
        encoded = body.get("data")
        if not isinstance(encoded, str):
            raise _Malformed(f"chunk {index:04d} holds no data")
        try:
            data += base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _Malformed(f"chunk {index:04d} is not base64") from exc
        if len(data) > size:
            break
    if len(data) != size:
        raise _Malformed(f"the document is {len(data)} bytes, the head says {size}")
    try:
        document = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _Malformed("the document is not UTF-8 JSON") from exc
    if not isinstance(document, dict):
        raise _Malformed("the document is not an object")
    if document.get("schema") != SCHEMA:
        raise _Malformed(f"the document's schema is not {SCHEMA}")
    return document


def _heartbeat(slot: str, head: _Row | None, chunks: dict[str, _Row], now: datetime) -> Heartbeat:
    application = slot.partition("/")[0]
    if head is None:
        any_chunk = next(iter(chunks.values()))
        return Heartbeat(application, slot, "malformed", None, any_chunk.expires_at, "chunks without a head")
    base = Heartbeat(application, slot, "malformed", head.updated_at, head.expires_at)
    try:
        document = _document(head, chunks)
        raw_pools = document.get("pool_status")
        if not isinstance(raw_pools, list):
            raise _Malformed("pool_status is not a list")
        pools = tuple(_pool(p) for p in raw_pools[:MAX_CHUNKS])
        reported = _text(document.get("state"), "state")
        pid = _count(document.get("pid"), "pid")
        hostname = _text(document.get("hostname"), "hostname")
        started_at = _epoch(document.get("started_at_epoch"), "started_at_epoch")
        configuration = document.get("configuration")
        seconds = configuration.get("heartbeat_timeout") if isinstance(configuration, dict) else None
        timeout = DEFAULT_TIMEOUT
        if isinstance(seconds, int | float) and not isinstance(seconds, bool) and 0 < seconds <= 86400:
            timeout = timedelta(seconds=seconds)
    except _Malformed as exc:
        return replace(base, problem=str(exc))
    state: State = "stopped" if reported == "stopped" else "running"
    if head.expires_at is not None and head.expires_at <= now:
        state = "expired"
    elif state == "running" and now - head.updated_at > timeout:
        state = "stale"
    return Heartbeat(
        application,
        slot,
        state,
        head.updated_at,
        head.expires_at,
        "",
        hostname,
        pid,
        reported,
        started_at,
        timeout,
        pools,
    )


def supervision_heartbeats(*, now: datetime) -> Heartbeats:
    """Every consumer heartbeat stored, expired ones not yet reaped included,
    by slot (``application/instance``). One statement: at most ``MAX_ROWS``
    KV rows (``truncated`` says the read stopped there)."""
    scanned = kv_scan_stored(namespace=NAMESPACE, limit=MAX_ROWS + 1)
    truncated = len(scanned) > MAX_ROWS
    heads: dict[str, _Row] = {}
    chunks: dict[str, dict[str, _Row]] = {}
    for row in scanned[:MAX_ROWS]:
        slot, _, tail = row.key.rpartition("/")
        if tail == "head" and slot:
            heads[slot] = _row(row)
            continue
        owner, _, word = slot.rpartition("/")
        if word == "chunk" and owner:
            chunks.setdefault(owner, {})[tail] = _row(row)
    slots = sorted(set(heads) | set(chunks))
    if truncated and slots and slots[-1] not in heads:
        # A slot's chunks sort before its head: the page may have stopped
        # between them.
        slots.pop()
    beats = tuple(_heartbeat(slot, heads.get(slot), chunks.get(slot, {}), now) for slot in slots)
    return Heartbeats(beats, truncated)


@dataclass(frozen=True)
class Readers:
    """What the fresh heartbeats read: queues by name, and by namespace and task."""

    queues: frozenset[str]
    #: (namespace, task) of each pool that names no queue; None: any.
    scopes: frozenset[tuple[str | None, str | None]]

    def read(self, *, queue: str, namespace: str | None, task: str | None) -> bool:
        """Whether a live consumer says it reads ``queue`` (of ``namespace``
        and ``task``): by its name, or by the namespace or task it consumes."""
        if queue in self.queues:
            return True
        if not self.scopes:
            return False
        return any((ns is None or ns == namespace) and (tk is None or tk == task) for ns, tk in self.scopes)


def heartbeat_readers(beats: Heartbeats) -> Readers:
    """The queues the running, fresh heartbeats of ``beats`` read."""
    queues: set[str] = set()
    scopes: set[tuple[str | None, str | None]] = set()
    for beat in beats.beats:
        if not beat.fresh:
            continue
        for pool in beat.pools:
            if pool.queue is not None:
                queues.add(pool.queue)
            elif pool.namespace is not None or pool.task is not None:
                scopes.add((pool.namespace, pool.task))
    return Readers(frozenset(queues), frozenset(scopes))

"""The queue store interface, and the SQL both databases share.

Each method runs inside whatever transaction the caller holds (or
autocommit) and decides nothing: the rules are in ``domain/queues/*``.
Times come back as aware UTC datetimes and ``Queue.options`` as a dict, on
both databases.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Literal

from django.db import connection
from django.db.models import Func

from queenadmin.models.queues import Queue
from queenadmin.plumbing.db import from_db_time, to_db_time

#: The NOTIFY channel of pushes (``wakeups``): the payload is a queue name.
CHANNEL = "queenadmin_queues"

#: (queue name, queue id, options) of a queue row.
QueueRow = tuple[str, int, dict[str, Any]]
#: (queue name, queue id, options, partition name, partition id, next offset);
#: the partition fields are None for a queue none of whose partitions matched.
LocatedRow = tuple[str, int, dict[str, Any], str | None, int | None, int | None]
#: (partition id, transactionId, message id, offset, pushed at).
RecentRow = tuple[int, str, str, int, datetime]
#: (partition id, offset, transactionId, message id, payload JSON, trace id, producer sub).
MessageRow = tuple[int, int, str, str, str, str | None, str | None]
#: (partition id, cursor id or None, lease id, leased until, last claim, last push).
CandidateRow = tuple[int, int | None, str | None, datetime | None, datetime | None, datetime | None]
#: (queue, created at (None when sampled at the first tick), pushed, popped,
#: completed ever at the last tick; the same at the first tick, or None).
QueueRateRow = tuple[str, datetime | None, int, int, int, int | None, int | None, int | None]
#: (queue, group, first tick, last tick, popped, acked, dead-lettered, lag).
GroupRateRow = tuple[str, str, datetime, datetime, int, int, int, int]
#: (cursor id, committed offset, delivery runs as stored, next offset,
#: partition name, log start).
FreeCursorRow = tuple[int, int, Any, int, str, int]


@dataclass(frozen=True)
class Append:
    """One message for ``Store.append_one``."""

    partition_id: int
    transaction_id: str
    #: A message of the same transactionId pushed after this wins (None: no dedup).
    dedup_after: datetime | None
    offset: int
    message_id: str
    payload_json: str
    trace_id: str | None
    #: The queue's name, for the wake-up of its pops.
    queue: str
    now: datetime
    #: Who pushed it (``producerSub``).
    producer_sub: str | None = None


@dataclass(frozen=True)
class LonePush:
    """One message for ``Store.push_one_committed``: a push of it alone."""

    queue: str
    partition: str
    #: The dedup key (the message id when the item named none).
    transaction_id: str
    #: Whether ``transaction_id`` was named, so it deduplicates.
    dedup: bool
    message_id: str
    payload_json: str
    trace_id: str | None
    now: datetime
    #: Who pushed it (``producerSub``).
    producer_sub: str | None = None


@dataclass(frozen=True)
class LonePushed:
    """What ``Store.push_one_committed`` did, committed."""

    #: ``queued``: the message is in at ``offset``; ``duplicate``: the
    #: transactionId's original is ``message_id`` at ``offset``.
    outcome: Literal["queued", "duplicate"]
    message_id: str
    offset: int


#: (offset, transactionId, message id, payload JSON, trace id, pushed at, producer sub).
ClaimedRow = tuple[int, str, str, str, str | None, datetime, str | None]


@dataclass(frozen=True)
class OneClaim:
    """What ``Store.claim_one`` did with one free partition."""

    #: ``claimed``: ``messages`` of ``partition_id`` are leased (or
    #: committed, with auto-ack); ``empty``: no partition was free;
    #: ``general``: the case needs the transactional claim, nothing changed.
    outcome: Literal["claimed", "empty", "general"]
    partition_id: int | None = None
    partition: str | None = None
    #: In offset order.
    messages: tuple[ClaimedRow, ...] = ()
    #: The earliest end of a live lease on a partition with messages left
    #: (read before the claim).
    retry_at: datetime | None = None


#: What ``Store.ack_completed`` says of one acknowledgment.
AckVerdict = Literal["applied", "noop", "unresolvable", "bad_lease", "no_partition"]


@dataclass(frozen=True)
class CompletedAcks:
    """What ``Store.ack_completed`` did: a verdict per acknowledgment, in order."""

    #: (verdict, lease released) per acknowledgment.
    verdicts: tuple[tuple[AckVerdict, bool], ...]
    #: Queues whose released leases left messages to claim (their pops
    #: were notified).
    woken: tuple[str, ...]


def options_of(value: Any) -> dict[str, Any]:
    """``Queue.options`` as a dict: raw SQL reads JSON as text on both backends."""
    return value if isinstance(value, dict) else json.loads(value)


#: Of every partition in ``{ids}``: the first offset pushed after the cutoff
#: (its ``next_offset`` when none), by binary search over offsets in one
#: recursive statement. A message retention already removed reads as old.
_PARKED_SQL = """
WITH RECURSIVE s(pid, lo, hi) AS (
    SELECT id, CAST(0 AS BIGINT), next_offset FROM queenadmin_partition WHERE id IN ({ids})
    UNION ALL
    SELECT pid,
        CASE WHEN EXISTS (
            SELECT 1 FROM queenadmin_message m
            WHERE m.partition_id = s.pid AND m.msg_offset = (s.lo + s.hi) / 2 AND m.created_at > %s
        ) THEN lo ELSE (lo + hi) / 2 + 1 END,
        CASE WHEN EXISTS (
            SELECT 1 FROM queenadmin_message m
            WHERE m.partition_id = s.pid AND m.msg_offset = (s.lo + s.hi) / 2 AND m.created_at > %s
        ) THEN (lo + hi) / 2 ELSE hi END
    FROM s WHERE lo < hi
)
SELECT pid, lo FROM s WHERE lo >= hi
"""


# --------------------------------------------------------------------------
# Error signatures: a dead letter's error text with what varies from one
# failure to the next (uuids, ids, numbers) made alike, so the DLQ page can
# count failures by kind. Computed in SQL (``Store.error_signature``) so the
# database groups, counts and filters by it; ``error_signature_of`` is the
# same rule in Python (SQLite runs it as a function of its own).

#: Characters of the error read (its beginning), and of the signature kept.
SIGNATURE_INPUT_CHARS = 1000
SIGNATURE_CHARS = 200
#: The rules, applied in order: (pattern, replacement). Each pattern means
#: the same to Python's ``re`` and to PostgreSQL's regular expressions
#: (both have lookbehind, lookahead and ``\t`` in brackets), so the two
#: implementations agree (``tests/unit/test_dlq_replay.py`` checks them on
#: PostgreSQL). An id is a run of 8 or more letters and digits holding a
#: digit (hex ids, hashes, ULIDs), whole; then every other run of digits.
SIGNATURE_RULES: tuple[tuple[str, str], ...] = (
    (r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", "<uuid>"),
    (r"(?<![A-Za-z0-9])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{8,}(?![A-Za-z0-9])", "<id>"),
    (r"[0-9]+", "<n>"),
    (r"[ \t\r\n]+", " "),
)
_SIGNATURE_RES = tuple((re.compile(pattern), replacement) for pattern, replacement in SIGNATURE_RULES)


def from_unix_micros(micros: int) -> datetime:
    """A ``Store.unix_micros`` value as the aware UTC datetime it was."""
    return _UNIX_EPOCH + timedelta(microseconds=micros)


_UNIX_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def error_signature_of(error: str | None) -> str:
    """The signature of an error text: ``SIGNATURE_RULES`` applied to its
    first ``SIGNATURE_INPUT_CHARS`` characters, spaces trimmed, cut to
    ``SIGNATURE_CHARS``; ``""`` for none."""
    text = (error or "")[:SIGNATURE_INPUT_CHARS]
    for pattern, replacement in _SIGNATURE_RES:
        text = pattern.sub(replacement, text)
    return text.strip(" ")[:SIGNATURE_CHARS]


#: ``Store.slowest_groups``: the portable SQL of both databases (CASE for
#: GREATEST and LEAST, integers for booleans).
_SLOWEST_SQL = (
    "WITH g AS ("
    " SELECT queue_id, name AS grp FROM queenadmin_consumergroup"
    " UNION ALL SELECT q.id, %s FROM queenadmin_queue q"
    " WHERE NOT EXISTS (SELECT 1 FROM queenadmin_consumergroup n WHERE n.queue_id = q.id)),"
    " k AS (SELECT p.id AS pid, p.queue_id AS qid, p.next_offset - 1 AS last, g.grp,"
    " CASE WHEN p.log_start > 0 THEN p.log_start - 1 ELSE -1 END AS floor,"
    " COALESCE(c.committed_offset, -1) AS committed, COALESCE(c.batch_last, -1) AS batch_last,"
    " CASE WHEN c.lease_id IS NOT NULL AND c.leased_until > %s THEN 1 ELSE 0 END AS live"
    " FROM queenadmin_partition p JOIN g ON g.queue_id = p.queue_id"
    " LEFT JOIN queenadmin_consumercursor c ON c.partition_id = p.id AND c.group_name = g.grp),"
    " w AS (SELECT pid, qid, last, live,"
    " CASE WHEN committed < floor THEN floor ELSE committed END AS committed,"
    " CASE WHEN committed < floor AND batch_last < floor THEN floor ELSE batch_last END AS batch_last,"
    " ROW_NUMBER() OVER (PARTITION BY pid ORDER BY CASE WHEN committed < floor THEN floor ELSE committed END,"
    " grp COLLATE {binary}) AS n FROM k),"
    " f AS (SELECT c.partition_id AS pid, CAST(SUM(CASE WHEN c.batch_last < p.next_offset - 1"
    " THEN c.batch_last ELSE p.next_offset - 1 END - c.committed_offset) AS BIGINT) AS n"
    " FROM queenadmin_consumercursor c JOIN queenadmin_partition p ON p.id = c.partition_id"
    " WHERE c.lease_id IS NOT NULL AND c.leased_until > %s"
    " AND c.batch_last > c.committed_offset AND p.next_offset - 1 > c.committed_offset"
    " GROUP BY c.partition_id)"
    " SELECT w.pid, w.qid, w.last, w.committed, w.live, w.batch_last, COALESCE(f.n, 0)"
    " FROM w LEFT JOIN f ON f.pid = w.pid WHERE w.n = 1"
)


class Store:
    """What the queue domain needs of a database. Subclasses fill in the rest."""

    #: ``append_one`` writes a lone message in one statement (else the
    #: caller takes ``recent_messages`` and ``write_messages``).
    appends_one: ClassVar[bool] = False

    # ------------------------------------------------------------------
    # Queue and partition rows (refs, push)

    def lock_queue_ids(self, ids: Sequence[int], *, exclusive: bool = False) -> set[int]:
        """Lock queue rows ``ids`` (sorted, distinct) for this transaction; those that exist.

        ``FOR KEY SHARE`` in id order, or ``FOR UPDATE`` when ``exclusive``
        (a delete), where the database has row locks.
        """
        raise NotImplementedError

    def lock_queues_by_name(self, names: Sequence[str]) -> list[QueueRow]:
        """The queues of ``names`` that exist, their rows locked as ``lock_queue_ids``."""
        read = list(Queue.objects.filter(name__in=names).values_list("name", "id", "options"))
        alive = self.lock_queue_ids(sorted({i for _, i, _ in read}))
        return [(n, i, options_of(o)) for n, i, o in read if i in alive]

    def lock_capped_queue(self, queue_id: int) -> None:
        """Hold the lock only pushes to a capped (``maxSize``) queue take, to commit.

        Taken after the queue rows and before any partition row. Without
        row locks there is one writer at a time and nothing to hold.
        """
        return None

    def locate(self, pairs: Sequence[tuple[str, str]]) -> list[LocatedRow] | None:
        """The queues and partitions of (queue, partition) ``pairs`` in one statement.

        One row per matching partition, or per queue with none matching.
        Where the database has row locks the queues are locked as
        ``lock_queues_by_name`` and, when every pair exists and no queue
        has a ``maxSize``, the partitions as ``lock_partitions`` (otherwise
        no partition is). None when the lookup cannot be one statement.
        """
        raise NotImplementedError

    def lock_partitions(self, ids: Sequence[int]) -> dict[int, int]:
        """Lock partitions ``ids`` (sorted) for a push; their next offsets.

        ``FOR NO KEY UPDATE`` where there are row locks: it leaves free the
        ``FOR KEY SHARE`` that deferred foreign-key checks take at commit.
        """
        raise NotImplementedError

    def delete_queue_messages(self, queue_id: int) -> int:
        """Delete every message of the queue's partitions in one statement; the count.

        Neither loads the rows nor cascades (the ORM's delete would load
        every message); the caller deletes what points at them first.
        """
        with connection.cursor() as cur:
            cur.execute(
                "DELETE FROM queenadmin_message WHERE partition_id IN"
                " (SELECT id FROM queenadmin_partition WHERE queue_id = %s)",
                [queue_id],
            )
            return int(cur.rowcount)

    def delete_queue_traces(self, queue_id: int) -> None:
        """Delete the trace events of the queue's partitions and their names, in two statements."""
        with connection.cursor() as cur:
            cur.execute(
                "DELETE FROM queenadmin_tracename WHERE trace_id IN (SELECT t.id FROM queenadmin_trace t"
                " JOIN queenadmin_partition p ON p.id = t.partition_id WHERE p.queue_id = %s)",
                [queue_id],
            )
            cur.execute(
                "DELETE FROM queenadmin_trace WHERE partition_id IN"
                " (SELECT id FROM queenadmin_partition WHERE queue_id = %s)",
                [queue_id],
            )

    # ------------------------------------------------------------------
    # Messages (push)

    def recent_messages(self, pairs: Sequence[tuple[int, str]], since: datetime) -> list[RecentRow]:
        """Messages of (partition, transactionId) ``pairs`` pushed after ``since``.

        May also return rows of other combinations of the same partitions
        and transactionIds; the caller keeps the pairs it asked for.
        """
        raise NotImplementedError

    def append_one(self, append: Append) -> tuple[str, int] | None:
        """Append one message to a partition this transaction locked, unless a dup.

        With ``append.dedup_after``, a message of the same transactionId
        pushed after it wins: its (message id, offset) is returned and
        nothing is written. Otherwise the message goes in at its offset,
        the partition's next offset and bytes move, waiting pops are
        notified (as ``notify``), and None is returned. Only where
        ``appends_one``.
        """
        raise NotImplementedError

    #: ``push_one_committed`` answers (else the caller pushes in a transaction).
    pushes_one_committed: ClassVar[bool] = False

    def push_one_committed(self, push: LonePush) -> LonePushed | None:
        """Push one message in one autocommit statement, outside any transaction.

        The queue and partition are found and locked as ``locate`` does,
        the dedup read runs after the partition lock is granted, and the
        message is appended as ``append_one`` does (NOTIFY included). None,
        nothing written, when the queue or partition is missing, the queue
        is capped, or its dedup window is not a number: the caller then
        takes the transactional path. Only where ``pushes_one_committed``.
        """
        raise NotImplementedError

    def write_messages(
        self, rows: Sequence[MessageRow], partitions: dict[int, tuple[int, int]], now: datetime, queues: Sequence[str]
    ) -> None:
        """Insert ``rows`` and move each partition's (next offset, added bytes).

        Also wakes the pops of ``queues`` as ``notify`` does.
        """
        raise NotImplementedError

    def write_new_messages(
        self,
        rows: Sequence[MessageRow],
        partitions: dict[int, tuple[int, int]],
        now: datetime,
        queues: Sequence[str],
        probe: Sequence[tuple[int, str]],
        since: datetime,
    ) -> list[RecentRow]:
        """``write_messages``, unless ``recent_messages(probe, since)`` finds
        any row: then nothing is written and those rows are returned (an
        empty list: written).
        """
        found = self.recent_messages(probe, since)
        if not found:
            self.write_messages(rows, partitions, now, queues)
        return found

    # ------------------------------------------------------------------
    # Wake-ups

    def notify(self, names: Sequence[str]) -> None:
        """Wake other processes' pops of queues ``names`` when this transaction commits."""
        return None

    def listen_params(self) -> dict[str, Any] | None:
        """Connection settings to ``listen`` with; None: nothing to listen to."""
        return None

    async def listen(self, params: dict[str, Any], *, ready: Callable[[], None], woken: Callable[[str], None]) -> None:
        """Listen for ``notify`` from any process until the connection fails.

        Calls ``ready`` once listening, then ``woken(queue)`` per notification.
        """
        raise NotImplementedError

    # ------------------------------------------------------------------
    # Claims (consume)

    def claim_candidates(self, *, queue_id: int, group: str, partition: str | None) -> list[CandidateRow]:
        """Partitions of the queue with messages ``group`` has not finished.

        Something is left when the last offset is past both the group's
        committed offset (-1 without a cursor) and the log start.
        """
        sql = (
            "SELECT p.id, c.id, c.lease_id, c.leased_until, c.last_claim_at, p.last_push_at"
            " FROM queenadmin_partition p LEFT JOIN queenadmin_consumercursor c"
            " ON c.partition_id = p.id AND c.group_name = %s"
            " WHERE p.queue_id = %s AND p.next_offset - 1 > COALESCE(c.committed_offset, -1)"
            " AND p.next_offset > p.log_start"
        )
        params: list[Any] = [group, queue_id]
        if partition is not None:
            sql += " AND p.name = %s"
            params.append(partition)
        with connection.cursor() as cur:
            cur.execute(sql, params)
            rows = cur.fetchall()
        return [
            (pid, cid, lease, from_db_time(until), from_db_time(claim), from_db_time(push))
            for pid, cid, lease, until, claim, push in rows
        ]

    #: What ends ``lock_free_cursor``'s statement: the row lock, if any.
    _FREE_CURSOR_LOCK: ClassVar[str] = ""

    def lock_free_cursor(self, *, partition_id: int, group: str, now: datetime) -> FreeCursorRow | None:
        """The group's cursor on the partition, locked, if no live lease holds it.

        None when it is leased, or (with row locks) another claim holds it.
        """
        sql = (
            "SELECT c.id, c.committed_offset, c.delivery_runs, p.next_offset, p.name, p.log_start"
            " FROM queenadmin_consumercursor c JOIN queenadmin_partition p ON p.id = c.partition_id"
            " WHERE c.partition_id = %s AND c.group_name = %s AND (c.lease_id IS NULL OR c.leased_until <= %s)"
        )
        with connection.cursor() as cur:
            cur.execute(sql + self._FREE_CURSOR_LOCK, [partition_id, group, to_db_time(now)])
            return cur.fetchone()  # type: ignore[no-any-return]

    #: ``claim_one`` and ``ack_completed`` answer (else they return None).
    one_statement_consume: ClassVar[bool] = False

    def claim_one(
        self,
        *,
        queue: str,
        group: str,
        partition: str | None,
        skip: Sequence[int],
        budget: int,
        lease_id: str,
        lease_seconds: int | None,
        auto_ack: bool,
        now: datetime,
    ) -> OneClaim | None:
        """Claim the first free partition of ``queue`` for ``group`` in one
        autocommit statement, as ``consume.pop._claim_queue`` would.

        Up to ``budget`` messages of the least recently claimed free
        partition (``partition`` only, when given; not those of ``skip``).
        Only the plain case: the queue exists without ``delayedProcessing``
        or ``windowBuffer``, the group is queue mode or registered without
        conflation, every candidate partition has the group's cursor, and
        the claimed offsets were never delivered (no redelivery). Anything
        else answers ``general`` having changed nothing. None where the
        database has no such statement.
        """
        return None

    def ack_completed(
        self, *, items: Sequence[tuple[str, int, str | None, str]], now: datetime
    ) -> CompletedAcks | None:
        """Apply ``completed`` acknowledgments in one autocommit statement.

        ``items`` are (transactionId, partition id, lease id, group). Each
        cursor moves to the highest message acknowledged on it and releases
        its lease once past the batch, as ``consume.ack._ack_cursor`` does for
        ``completed``; pops of queues with messages left are notified. None
        (nothing changed) where the database has no such statement, or when
        a named (partition, group) has no cursor row yet.
        """
        return None

    # ------------------------------------------------------------------
    # Retention

    def due_partitions(self, *, queue_id: int, before: datetime) -> list[int]:
        """Partitions of the queue whose message at the log start was pushed before ``before``."""
        with connection.cursor() as cur:
            cur.execute(
                "SELECT p.id FROM queenadmin_partition p JOIN queenadmin_message m"
                " ON m.partition_id = p.id AND m.msg_offset = p.log_start"
                " WHERE p.queue_id = %s AND m.created_at < %s ORDER BY p.id",
                [queue_id, to_db_time(before)],
            )
            return [int(row[0]) for row in cur.fetchall()]

    #: What ends ``lock_partition_for_sweep``'s statement: the row lock, if any.
    _SWEEP_LOCK: ClassVar[str] = ""

    def lock_partition_for_sweep(self, partition_id: int) -> tuple[int, int] | None:
        """(log start, next offset) of the partition, row locked unless busy.

        None when the partition is gone or (with row locks) a push or
        another sweeper holds it: it is skipped, never waited for.
        """
        with connection.cursor() as cur:
            cur.execute(
                "SELECT log_start, next_offset FROM queenadmin_partition WHERE id = %s" + self._SWEEP_LOCK,
                [partition_id],
            )
            row = cur.fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    #: The payload's size in bytes, as SQL.
    _PAYLOAD_BYTES: ClassVar[str] = ""

    def message_sizes(self, *, partition_id: int, first: int, last: int) -> list[tuple[int, datetime, int]]:
        """(offset, pushed at, payload bytes) of the stored messages ``first..last``, in order."""
        with connection.cursor() as cur:
            cur.execute(
                f"SELECT msg_offset, created_at, {self._PAYLOAD_BYTES} FROM queenadmin_message"
                " WHERE partition_id = %s AND msg_offset >= %s AND msg_offset <= %s ORDER BY msg_offset",
                [partition_id, first, last],
            )
            rows = cur.fetchall()
        return [(int(offset), from_db_time(created), int(nbytes)) for offset, created, nbytes in rows]

    def cut_log(self, *, partition_id: int, log_start: int, boundary: int, freed_bytes: int) -> int | None:
        """Delete offsets ``log_start..boundary-1`` and move the log start to ``boundary``.

        Returns the messages deleted, or None when the log start is no
        longer ``log_start`` (compare-and-set: correct without row locks);
        the caller must then roll back.
        """
        with connection.cursor() as cur:
            cur.execute(
                "DELETE FROM queenadmin_message WHERE partition_id = %s AND msg_offset >= %s AND msg_offset < %s",
                [partition_id, log_start, boundary],
            )
            deleted = int(cur.rowcount)
            cur.execute(
                "UPDATE queenadmin_partition SET log_start = %s, retained_bytes = retained_bytes - %s"
                " WHERE id = %s AND log_start = %s",
                [boundary, freed_bytes, partition_id, log_start],
            )
            return deleted if cur.rowcount == 1 else None

    # ------------------------------------------------------------------
    # Dashboard reads (board, history, browse); no locks

    def push_times(self, pairs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], datetime]:
        """Push time of each stored (partition, offset) of ``pairs``, in one statement.

        A join to a ``VALUES`` list (columns ``column1``, ``column2`` on
        both databases): PostgreSQL plans it as a nested loop of index
        lookups, where 100 OR'd conditions cost it more to plan than to run.
        """
        if not pairs:
            return {}
        values = ", ".join(["(%s, %s)"] * len(pairs))
        sql = (
            "SELECT m.partition_id, m.msg_offset, m.created_at FROM queenadmin_message m"
            f" JOIN (VALUES {values}) w ON m.partition_id = w.column1 AND m.msg_offset = w.column2"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [v for pair in pairs for v in pair])
            return {(int(pid), int(offset)): from_db_time(created) for pid, offset, created in cur.fetchall()}

    #: The collation that orders text by its bytes.
    _BYTE_ORDER: ClassVar[str] = '"C"'

    def slowest_groups(self, *, now: datetime, queue_mode: str) -> list[tuple[int, int, int, int, bool, int, int]]:
        """Every partition's slowest group, for the depth of every queue.

        Rows of (partition id, queue id, last offset; of the group furthest
        behind: its committed offset, whether it holds a lease live at
        ``now``, its batch's last offset; the messages leased under every
        live lease of the partition). The groups that count are the queue's
        registered ones, else ``queue_mode``; a group with no cursor reads
        from the start, a cursor below the log start as at it; ties go to
        the first group in byte order. One statement, so the thousands of
        cursor rows of a large broker stay in the database.
        """
        when = to_db_time(now)
        with connection.cursor() as cur:
            cur.execute(_SLOWEST_SQL.format(binary=self._BYTE_ORDER), [queue_mode, when, when])
            return [
                (pid, qid, last, committed, bool(live), batch_last, int(in_flight))
                for pid, qid, last, committed, live, batch_last, in_flight in cur.fetchall()
            ]

    def parked_from(self, partition_ids: Sequence[int], cutoff: datetime) -> dict[int, int]:
        """Per partition, the first offset pushed after ``cutoff`` (``next_offset``: none).

        Offsets are pushed in time order, so a binary search finds it.
        """
        if not partition_ids:
            return {}
        when = to_db_time(cutoff)
        with connection.cursor() as cur:
            cur.execute(_PARKED_SQL.format(ids=", ".join(["%s"] * len(partition_ids))), [*partition_ids, when, when])
            return {int(pid): int(lo) for pid, lo in cur.fetchall()}

    def dlq_counts(self, queue_ids: Sequence[int], *, cap: int, per_partition: bool) -> list[tuple[int, int, int]]:
        """(queue id, partition id or 0, dead letters) counting at most ``cap + 1`` per queue.

        One statement: a bounded sub-select per queue on the ``queue, id``
        index. ``per_partition`` reads the rows to split them by partition;
        otherwise the index alone answers, under partition 0.
        """
        if not queue_ids:
            return []
        table = "queenadmin_deadletter"
        if per_partition:
            branch = f"SELECT * FROM (SELECT queue_id, partition_id FROM {table} WHERE queue_id = %s LIMIT {cap + 1}) b"
            sql = (
                "SELECT queue_id, partition_id, COUNT(*) FROM (" + " UNION ALL ".join([branch] * len(queue_ids)) + ") u"
            )
            sql += " GROUP BY queue_id, partition_id"
            params: list[Any] = list(queue_ids)
        else:
            branch = f"SELECT %s, 0, COUNT(*) FROM (SELECT id FROM {table} WHERE queue_id = %s LIMIT {cap + 1}) b"
            sql = " UNION ALL ".join([branch] * len(queue_ids))
            params = [v for qid in queue_ids for v in (qid, qid)]
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [(int(qid), int(pid), int(n)) for qid, pid, n in cur.fetchall()]

    def error_signature(self, column: str) -> Func:
        """The expression of ``column``'s error signature (``error_signature_of``),
        to annotate, group and filter dead letters by."""
        raise NotImplementedError

    def unix_micros(self, column: str) -> Func:
        """The expression of timestamp ``column`` as whole microseconds since
        the Unix epoch (an integer, exact): the charts read a few thousand
        sample times a render, and an integer costs a fraction of a
        timestamp to load (``from_unix_micros`` turns it back)."""
        raise NotImplementedError

    def partition_heads(
        self, partition_ids: Sequence[int], *, until: datetime | None, size: int
    ) -> dict[int, list[tuple[int, int, datetime]]]:
        """The newest ``size`` (message id, offset, pushed at) of each partition, newest first.

        ``until`` leaves out messages pushed after it. One index range per
        partition joined with UNION ALL: one statement, not one per partition.
        """
        if not partition_ids:
            return {}
        where = "partition_id = %s" + (" AND created_at <= %s" if until is not None else "")
        part = (
            f"SELECT * FROM (SELECT partition_id, id, msg_offset, created_at FROM queenadmin_message"
            f" WHERE {where} ORDER BY msg_offset DESC LIMIT %s) AS h{{n}}"
        )
        sql = " UNION ALL ".join(part.format(n=n) for n in range(len(partition_ids)))
        params: list[Any] = []
        for pid in partition_ids:
            params += [pid, to_db_time(until), size] if until is not None else [pid, size]
        heads: dict[int, list[tuple[int, int, datetime]]] = {}
        with connection.cursor() as cur:
            cur.execute(sql, params)
            for pid, mid, offset, created in cur.fetchall():
                heads.setdefault(pid, []).append((mid, offset, from_db_time(created)))
        for head in heads.values():
            head.sort(key=lambda k: -k[1])
        return heads

    # ------------------------------------------------------------------
    # Rates over the last minutes (``rates``), from the sampler's rows

    def queue_rate_ends(
        self, *, resolution: int, last: datetime, first: datetime, queues: Sequence[str] | None
    ) -> list[QueueRateRow]:
        """Per queue sampled at tick ``last`` (or of ``queues`` only): (queue,
        created at (only when not sampled at ``first``), pushed, popped,
        completed ever at ``last``; the same at tick ``first``, None when not
        sampled then).

        One statement of two lookups a queue on the (queue, resolution, at)
        index: never the rows between the two ticks.
        """
        sample = (
            "JOIN queenadmin_queuesample {a} ON {a}.queue = q.name AND {a}.resolution = %s AND {a}.at = %s"
            " AND {a}.queue_id = q.id"
        )
        sql = (
            # The creation time only where the first tick was not sampled
            # (the one case that reads it).
            "SELECT q.name, CASE WHEN f.id IS NULL THEN q.created_at END, l.pushed_total, l.popped_total,"
            " l.acked_total + l.dlq_total,"
            " f.pushed_total, f.popped_total, f.acked_total + f.dlq_total FROM queenadmin_queue q "
            + sample.format(a="l")
            + " LEFT "
            + sample.format(a="f")
        )
        params: list[Any] = [resolution, to_db_time(last), resolution, to_db_time(first)]
        if queues is not None:
            # No names still runs the statement: a page's query count stays the same.
            sql += " WHERE q.name IN (" + ", ".join(["%s"] * len(queues)) + ")" if queues else " WHERE 1 = 0"
            params += queues
        with connection.cursor() as cur:
            cur.execute(sql, params)
            return [
                (
                    q,
                    None if created is None else from_db_time(created),
                    int(p),
                    int(o),
                    int(c),
                    None if fp is None else int(fp),
                    None if fo is None else int(fo),
                    None if fc is None else int(fc),
                )
                for q, created, p, o, c, fp, fo, fc in cur.fetchall()
            ]

    def group_rate_sums(self, *, since: datetime, until: datetime, queue: str | None, limit: int) -> list[GroupRateRow]:
        """Per queue and consumer group with a row in ``(since, until]``: (queue,
        group, first tick, last tick, popped, acked, dead-lettered, lag at the
        last tick), in (queue, group) order, at most ``limit``. A group
        missing from its queue's newest tick (deleted, or queue mode before
        a named group came) is left out.

        One statement: the window's rows summed per group, joined to each
        group's last tick for its lag.
        """
        where = "at > %s AND at <= %s"
        params: list[Any] = [to_db_time(since), to_db_time(until)]
        if queue is not None:
            where += " AND queue = %s"
            params.append(queue)
        sql = (
            "WITH w AS (SELECT queue, group_name, at, popped, acked, dlq, lag"
            f" FROM queenadmin_groupsample WHERE {where}),"
            " e AS (SELECT queue, group_name, MIN(at) AS first_at, MAX(at) AS last_at FROM w"
            " GROUP BY queue, group_name),"
            " n AS (SELECT queue, MAX(at) AS newest FROM w GROUP BY queue)"
            " SELECT w.queue, w.group_name, e.first_at, e.last_at, SUM(w.popped), SUM(w.acked), SUM(w.dlq),"
            " MAX(CASE WHEN w.at = e.last_at THEN w.lag END)"
            " FROM w JOIN e ON e.queue = w.queue AND e.group_name = w.group_name"
            " JOIN n ON n.queue = w.queue AND n.newest = e.last_at"
            " GROUP BY w.queue, w.group_name, e.first_at, e.last_at"
            " ORDER BY w.queue, w.group_name LIMIT %s"
        )
        with connection.cursor() as cur:
            cur.execute(sql, [*params, limit])
            return [
                (q, g, from_db_time(first), from_db_time(last), int(o), int(a), int(d), int(lag or 0))
                for q, g, first, last, o, a, d, lag in cur.fetchall()
            ]


def chunks(values: Sequence[Any], size: int) -> Iterable[Sequence[Any]]:
    """``values`` in slices of at most ``size``."""
    for start in range(0, len(values), size):
        yield values[start : start + size]

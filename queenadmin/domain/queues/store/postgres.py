"""Queue rows on PostgreSQL: row locks in one fixed order, arrays, NOTIFY.

Every writer of a queue takes its queue row first (``FOR KEY SHARE``, by
id; a delete ``FOR UPDATE``), then its partitions (``FOR NO KEY UPDATE``,
by id), so writers never deadlock and a delete waits for those in flight.
Hot statements run bound on the server (``db.pg_run``, ``db.server_cursor``):
arrays travel as one binary parameter instead of quoted element by element.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from django.db import connection
from django.db.models import BigIntegerField, F, Func, TextField

from queenadmin.domain.queues.store.base import (
    CHANNEL,
    SIGNATURE_CHARS,
    SIGNATURE_INPUT_CHARS,
    SIGNATURE_RULES,
    Append,
    LocatedRow,
    LonePush,
    LonePushed,
    MessageRow,
    QueueRow,
    RecentRow,
    Store,
    options_of,
)
from queenadmin.domain.queues.store.postgres_consume import PostgresConsume
from queenadmin.plumbing.db import from_db_time, listen_params, pg_run, server_cursor

#: First argument of the two-int advisory lock that serialises the pushes
#: to one capped (``maxSize``) queue; the KV store's key locks use 0x51AD.
MAX_SIZE_LOCK_CLASS = 0x51AD_0002

#: A push's queues and partitions found and locked in one prepared
#: statement, when every (queue, partition) pair exists and no queue is
#: capped; the order stays the one every writer follows: the queue rows
#: (``FOR KEY SHARE``, by id: the InitPlans of ``l`` read all of ``q``
#: before any partition is locked), then the partitions (``FOR NO KEY
#: UPDATE``, by id). Ids are looked up by name in the statement itself, so
#: nothing is cached across calls: a queue deleted and created anew, or
#: configured, in another process is simply what the statement finds. When
#: a pair is missing (or a queue has a ``maxSize``: its advisory lock comes
#: before the partitions) no partition is locked and the caller takes the
#: general path. ``maxSize`` counts as absent only when it is 0, 0.0, null
#: or missing, a subset of what ``QueueRef.max_size`` reads as 0.
_LOCATE = (
    "WITH w AS (SELECT DISTINCT qn, pn FROM unnest(%s::text[], %s::text[]) AS w(qn, pn)),"
    " q AS MATERIALIZED (SELECT id, name, options FROM queenadmin_queue"
    " WHERE name IN (SELECT qn FROM w) ORDER BY id FOR KEY SHARE),"
    " c AS MATERIALIZED (SELECT p.id FROM w JOIN q ON q.name = w.qn"
    " JOIN queenadmin_partition AS p ON p.queue_id = q.id AND p.name = w.pn),"
    " l AS MATERIALIZED (SELECT id, queue_id, name, next_offset FROM queenadmin_partition"
    " WHERE id IN (SELECT id FROM c) AND (SELECT count(*) FROM c) = (SELECT count(*) FROM w)"
    " AND NOT EXISTS (SELECT FROM q WHERE coalesce(q.options -> 'maxSize', 'null') NOT IN ('0', 'null'))"
    " ORDER BY id FOR NO KEY UPDATE)"
    " SELECT q.name, q.id, q.options, l.name, l.id, l.next_offset FROM q LEFT JOIN l ON l.queue_id = q.id"
)

#: One message appended to a partition locked by this transaction, in one
#: prepared statement: the dedup read (in the same snapshot as the write,
#: taken after the partition lock, as ``recent_messages``), then, unless it
#: found the transactionId, the partition's next offset, the message and
#: the NOTIFY for waiting pops (``notify``).
_APPEND_ONE = (
    "WITH v AS (SELECT %s::bigint AS p, %s::text AS t, %s::timestamptz AS cutoff, %s::bigint AS o,"
    " %s::bigint AS b, %s::timestamptz AS now, %s::text AS m, %s::text AS d, %s::text AS r, %s::text AS q,"
    " %s::text AS s),"
    # OFFSET 0 keeps the ORDER BY ... LIMIT from steering a generic plan to
    # the (partition, offset) index, which would read the whole partition
    # whenever the transactionId is new (the common case).
    " d AS (SELECT s.message_id, s.msg_offset FROM (SELECT m.message_id, m.msg_offset FROM queenadmin_message AS m, v"
    " WHERE m.partition_id = v.p AND m.transaction_id = v.t AND m.created_at > v.cutoff OFFSET 0) AS s"
    " ORDER BY s.msg_offset LIMIT 1),"
    " u AS (UPDATE queenadmin_partition SET next_offset = v.o + 1,"
    " retained_bytes = retained_bytes + v.b, last_push_at = v.now"
    " FROM v WHERE id = v.p AND NOT EXISTS (SELECT FROM d) RETURNING id),"
    " i AS (INSERT INTO queenadmin_message"
    " (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, producer_sub, created_at)"
    " SELECT v.p, v.o, v.t, v.m, v.d, v.r, v.s, v.now FROM v WHERE NOT EXISTS (SELECT FROM d) RETURNING 1),"
    f" n AS (SELECT pg_notify('{CHANNEL}', v.q) FROM v, i)"
    " SELECT (SELECT message_id FROM d), (SELECT msg_offset FROM d), (SELECT count(*) FROM n), (SELECT count(*) FROM u)"
)


#: The function behind ``push_one_committed``: a lone push of one message,
#: outside any transaction, in one autocommit statement (one round trip
#: instead of BEGIN, ``_LOCATE``, ``_APPEND_ONE`` and COMMIT: BEGIN and
#: COMMIT alone were 148 us of PostgreSQL's 580 a push, bench/log.py). The
#: migrations create it from a frozen copy of this text (0031); a change
#: here needs a migration that replaces it, which
#: ``tests/unit/test_push_statements.py`` checks.
#:
#: In order, as the transactional path does: (1) the queue row ``FOR KEY
#: SHARE``, then the partition row ``FOR NO KEY UPDATE`` (``_LOCATE``'s
#: locks, in its order); a missing queue or partition, a ``maxSize`` (its
#: advisory lock comes before the partitions) or a dedup window that is
#: not a number answers ``general`` with nothing written, and the caller
#: takes the transactional path, which creates what is missing. (2) The
#: dedup read, a statement of its own after the lock: in READ COMMITTED a
#: VOLATILE function takes a new snapshot for each statement it runs, so
#: the read sees a message of the same transactionId that a concurrent
#: push committed while this one waited for the partition lock (one
#: statement locking and reading would read in the snapshot taken before
#: the wait, miss it, and append a second copy). (3) The append of
#: ``_APPEND_ONE``: the partition's next offset, retained bytes and push
#: time, the message, the NOTIFY for waiting pops (``notify``).
#:
#: Plans are cached per connection and made with sequential scans off: a
#: generic plan made while a table was small would otherwise stay a scan
#: as it grows (``queenadmin_kv_lock_and_read`` does the same). OFFSET 0
#: keeps the dedup read's ORDER BY ... LIMIT off the (partition, offset)
#: index, as in ``_APPEND_ONE``. The window is read as ``append_from_sql``
#: reads it: missing is 3600, a number is truncated to whole seconds.
PUSH_ONE_FUNCTION = f"""
CREATE OR REPLACE FUNCTION queenadmin_push_one(
    queue_name text, partition_name text, txn_id text, dedup boolean, new_id text,
    payload_json text, trace text, sub text, pushed_at timestamptz,
    OUT verdict text, OUT found_id text, OUT found_offset bigint
)
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $$
DECLARE
    qid bigint;
    opts jsonb;
    win jsonb;
    cutoff timestamptz;
    pid bigint;
    nxt bigint;
BEGIN
    verdict := 'general';
    SELECT q.id, q.options INTO qid, opts FROM queenadmin_queue AS q WHERE q.name = queue_name FOR KEY SHARE;
    IF NOT FOUND OR coalesce(opts -> 'maxSize', 'null') NOT IN ('0', 'null') THEN
        RETURN;
    END IF;
    IF dedup THEN
        win := coalesce(opts -> 'dedupWindowSeconds', '3600');
        IF jsonb_typeof(win) <> 'number' THEN
            RETURN;
        END IF;
        IF trunc(win::numeric) > 0 THEN
            cutoff := pushed_at - make_interval(secs => trunc(win::numeric)::double precision);
        END IF;
    END IF;
    SELECT p.id, p.next_offset INTO pid, nxt FROM queenadmin_partition AS p
    WHERE p.queue_id = qid AND p.name = partition_name FOR NO KEY UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF cutoff IS NOT NULL THEN
        SELECT s.message_id, s.msg_offset INTO found_id, found_offset
        FROM (SELECT m.message_id, m.msg_offset FROM queenadmin_message AS m
              WHERE m.partition_id = pid AND m.transaction_id = txn_id AND m.created_at > cutoff OFFSET 0) AS s
        ORDER BY s.msg_offset LIMIT 1;
        IF FOUND THEN
            verdict := 'duplicate';
            RETURN;
        END IF;
    END IF;
    UPDATE queenadmin_partition AS p SET next_offset = nxt + 1,
        retained_bytes = p.retained_bytes + octet_length(payload_json), last_push_at = pushed_at
    WHERE p.id = pid;
    INSERT INTO queenadmin_message
        (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, producer_sub, created_at)
    VALUES (pid, nxt, txn_id, new_id, payload_json, trace, sub, pushed_at);
    PERFORM pg_notify('{CHANNEL}', queue_name);
    verdict := 'queued';
    found_offset := nxt;
END
$$
"""

#: The call of ``PUSH_ONE_FUNCTION``.
_PUSH_ONE = (
    "SELECT verdict, found_id, found_offset FROM queenadmin_push_one(%s::text, %s::text, %s::text, %s::boolean,"
    " %s::text, %s::text, %s::text, %s::text, %s::timestamptz)"
)

#: Messages of (partition, transactionId) pairs pushed after a time: one
#: probe of the (partition, transactionId) index per pair. With ANY(pids)
#: AND ANY(txns), a message table growing faster than autovacuum analyzes
#: it got a plan that read the whole partition through the partition index
#: (11-22 ms instead of 0.8 ms at 50,000 rows; bench/timers.py measured the
#: fire rate halved by it). A plain join of the pairs was planned, for a
#: 1,000-message push, as a merge join over a sort of every recent message
#: (a sequential scan: 75-110 ms at 100,000 rows, and growing with the
#: table). A LATERAL subquery with OFFSET 0 is never pulled up into a join,
#: so it stays a nested loop of index probes (3-4 ms).
RECENT = (
    "SELECT u.p, u.t, m.message_id, m.msg_offset, m.created_at"
    " FROM unnest(%b::bigint[], %b::text[]) AS u(p, t)"
    " CROSS JOIN LATERAL (SELECT m.message_id, m.msg_offset, m.created_at FROM queenadmin_message AS m"
    " WHERE m.partition_id = u.p AND m.transaction_id = u.t AND m.created_at > %s OFFSET 0) AS m"
)


def append_from_sql(source: str) -> str:
    """CTEs that append the rows of the CTE ``source`` to the log, for a
    statement that makes those rows in its first CTEs (timers' fire).

    ``source`` has one row per message: ``queue``, ``partition``, ``txn``
    (its transactionId), ``message_id``, ``payload_json``, ``producer_sub``
    and ``seq`` (the push order). The CTEs follow the caller's, each led by
    a comma; the statement binds ``%(now)s`` (the push time). They apply
    ``_append``'s rules in SQL: the queues found and locked, then the
    partitions, as ``_LOCATE`` does; a transactionId the partition took
    within its queue's dedup window, or earlier in ``source``, is a
    duplicate; the others get the partition's next offsets in ``seq``
    order, the partitions their new offsets, bytes and push time, and
    their queues a NOTIFY (``notify``). ``log_append`` is one row:
    ``applied``, ``appended`` (messages written) and ``queues`` (those
    written to, sorted). When a (queue, partition) is missing, a queue is
    capped, or a dedup window is not a number, nothing is written
    (``applied`` false) and the caller takes the push path.
    """
    return (
        f", log_w AS MATERIALIZED (SELECT DISTINCT queue AS qn, partition AS pn FROM {source}),"
        " log_q AS MATERIALIZED (SELECT id, name, options FROM queenadmin_queue"
        " WHERE name IN (SELECT qn FROM log_w) ORDER BY id FOR KEY SHARE),"
        " log_c AS MATERIALIZED (SELECT p.id, log_w.qn, log_w.pn FROM log_w JOIN log_q ON log_q.name = log_w.qn"
        " JOIN queenadmin_partition AS p ON p.queue_id = log_q.id AND p.name = log_w.pn),"
        " log_ok AS MATERIALIZED (SELECT (SELECT count(*) FROM log_c) = (SELECT count(*) FROM log_w)"
        " AND NOT EXISTS (SELECT FROM log_q WHERE coalesce(log_q.options -> 'maxSize', 'null') NOT IN ('0', 'null')"
        " OR jsonb_typeof(coalesce(log_q.options -> 'dedupWindowSeconds', '0')) <> 'number') AS yes),"
        # The InitPlan reads every queue row (locked) before any partition is.
        " log_l AS MATERIALIZED (SELECT id, next_offset FROM queenadmin_partition"
        " WHERE id IN (SELECT id FROM log_c) AND (SELECT yes FROM log_ok) ORDER BY id FOR NO KEY UPDATE),"
        " log_r AS MATERIALIZED (SELECT s.seq, s.queue, s.txn, s.message_id, s.payload_json, s.producer_sub,"
        " log_l.id AS pid, log_l.next_offset, CASE WHEN w.win > 0"
        " THEN %(now)s::timestamptz - make_interval(secs => w.win::double precision) END AS cutoff"
        f" FROM {source} AS s JOIN log_q ON log_q.name = s.queue"
        " JOIN log_c ON log_c.qn = s.queue AND log_c.pn = s.partition JOIN log_l ON log_l.id = log_c.id"
        " CROSS JOIN LATERAL (SELECT trunc(coalesce((log_q.options ->> 'dedupWindowSeconds')::numeric, 3600)) AS win)"
        " AS w),"
        # As RECENT: a LATERAL probe per row, never a join.
        " log_d AS MATERIALIZED (SELECT log_r.*, log_r.cutoff IS NOT NULL AND (h.hit IS NOT NULL"
        " OR row_number() OVER (PARTITION BY log_r.pid, log_r.txn ORDER BY log_r.seq) > 1) AS dup"
        " FROM log_r LEFT JOIN LATERAL (SELECT 1 AS hit FROM queenadmin_message AS m WHERE m.partition_id = log_r.pid"
        " AND m.transaction_id = log_r.txn AND m.created_at > log_r.cutoff OFFSET 0 LIMIT 1) AS h ON true),"
        " log_o AS MATERIALIZED (SELECT log_d.*,"
        " log_d.next_offset - 1 + row_number() OVER (PARTITION BY log_d.pid ORDER BY log_d.seq) AS off"
        " FROM log_d WHERE NOT log_d.dup),"
        " log_u AS (UPDATE queenadmin_partition AS p SET next_offset = p.next_offset + v.n,"
        " retained_bytes = p.retained_bytes + v.b, last_push_at = %(now)s"
        " FROM (SELECT pid, count(*) AS n, sum(octet_length(payload_json)) AS b FROM log_o GROUP BY pid) AS v"
        " WHERE p.id = v.pid),"
        " log_i AS (INSERT INTO queenadmin_message"
        " (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, producer_sub, created_at)"
        " SELECT pid, off, txn, message_id, payload_json, NULL, producer_sub, %(now)s FROM log_o RETURNING 1),"
        f" log_n AS (SELECT x.qn, pg_notify('{CHANNEL}', x.qn) FROM (SELECT DISTINCT queue AS qn FROM log_o) AS x),"
        " log_append AS (SELECT (SELECT yes FROM log_ok) AS applied, (SELECT count(*) FROM log_i) AS appended,"
        " (SELECT array_agg(qn ORDER BY qn) FROM log_n) AS queues)"
    )


def _lines(values: Sequence[str]) -> str | None:
    """``values`` as one text, a line each, when PostgreSQL's
    ``string_to_array(text, E'\\n')`` gives them back; else None."""
    text = "\n".join(values)
    if text.count("\n") != len(values) - 1 or (len(values) == 1 and not text):
        return None
    return text


def _int_lines(values: Sequence[int]) -> str:
    return "\n".join(map(str, values))


#: A text of ``_lines`` as an array, or the array itself.
_SPLIT = "string_to_array(%b::text, E'\\n')"


def _write_statement(
    rows: Sequence[MessageRow],
    partitions: dict[int, tuple[int, int]],
    now: datetime,
    queues: Sequence[str],
    probe: Sequence[tuple[int, str]] | None,
    since: datetime | None,
) -> tuple[str, list[Any]]:
    """``write_messages``' statement; with ``probe``, guarded by the dedup
    read of ``write_new_messages``.

    One statement, not three (partitions, messages, NOTIFY): the
    data-modifying CTEs run to completion whether read or not. psycopg
    dumps an array element by element in Python (6 ms for the six arrays
    of a 1,000-message push), so every column goes as one text, a line per
    element, split by PostgreSQL; a text column with a newline of its own
    goes as an array, traces, when there are none, as NULL (multi-argument
    unnest pads with NULLs).
    """
    pids, offsets, txns, mids, payloads, traces, subs = (list(c) for c in zip(*rows, strict=True))
    # One producer for the whole push (the usual case: one caller) goes
    # as one text; mixed ones (timers' fires) as an array.
    one_sub = subs[0] if subs.count(subs[0]) == len(subs) else None
    many_subs = None if one_sub is not None or all(s is None for s in subs) else subs
    texts: list[Any] = []
    columns: list[str] = []
    for values in (txns, mids, payloads):
        joined = _lines(values)
        texts.append(values if joined is None else joined)
        columns.append("%b::text[]" if joined is None else _SPLIT)
    params: list[Any] = []
    guard = ""
    sql = "WITH "
    if probe is not None:
        probe_txns = [t for _, t in probe]
        joined = _lines(probe_txns)
        sql += (
            # As RECENT: a LATERAL probe per pair, never a join.
            "d AS MATERIALIZED (SELECT u.p, u.t, m.message_id, m.msg_offset, m.created_at"
            f" FROM unnest({_SPLIT}::bigint[], {'%b::text[]' if joined is None else _SPLIT}) AS u(p, t)"
            " CROSS JOIN LATERAL (SELECT m.message_id, m.msg_offset, m.created_at FROM queenadmin_message AS m"
            " WHERE m.partition_id = u.p AND m.transaction_id = u.t AND m.created_at > %s OFFSET 0) AS m),"
        )
        params += [_int_lines([p for p, _ in probe]), probe_txns if joined is None else joined, since]
        guard = " AND NOT EXISTS (SELECT FROM d)"
    sql += (
        "u AS (UPDATE queenadmin_partition AS p"
        " SET next_offset = v.n, retained_bytes = p.retained_bytes + v.b, last_push_at = %s"
        f" FROM unnest({_SPLIT}::bigint[], {_SPLIT}::bigint[], {_SPLIT}::bigint[]) AS v(id, n, b)"
        f" WHERE p.id = v.id{guard}),"
        " i AS (INSERT INTO queenadmin_message"
        " (partition_id, msg_offset, transaction_id, message_id, payload, trace_id, producer_sub, created_at)"
        " SELECT u.p, u.o, u.t, u.m, u.d, u.r, COALESCE(u.s, %s::text), %s"
        f" FROM unnest({_SPLIT}::bigint[], {_SPLIT}::bigint[], {columns[0]}, {columns[1]}, {columns[2]},"
        " %b::text[], %b::text[]) AS u(p, o, t, m, d, r, s)"
        f" WHERE true{guard}),"
        f" n AS (SELECT pg_notify('{CHANNEL}', q) FROM unnest(%b::text[]) AS q WHERE true{guard})"
    )
    params += [
        now,
        _int_lines(list(partitions)),
        _int_lines([n for n, _ in partitions.values()]),
        _int_lines([b for _, b in partitions.values()]),
        one_sub,
        now,
        _int_lines(pids),
        _int_lines(offsets),
        *texts,
        None if all(r is None for r in traces) else traces,
        many_subs,
        list(queues),
    ]
    if probe is None:
        sql += " SELECT count(*) FROM n"
    else:
        # The notifications' row (all NULL) makes sure ``n`` runs.
        sql += (
            " SELECT p, t, message_id, msg_offset, created_at FROM d"
            " UNION ALL SELECT NULL, NULL, NULL, NULL, NULL FROM (SELECT count(*) FROM n) AS c"
        )
    return sql, params


def _literal(text: str) -> str:
    # The rules are constants of ours, spelled inline rather than bound: a
    # GROUP BY must repeat the SELECT's expression, and two bound copies of
    # a parameter are two different expressions to PostgreSQL.
    assert "'" not in text, text
    assert "%" not in text, text
    return f"'{text}'"


class ErrorSignature(Func):
    """``error_signature_of`` as nested ``regexp_replace`` calls."""

    output_field = TextField()

    def as_sql(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:  # type: ignore[override]
        sql, params = compiler.compile(self.source_expressions[0])
        sql = f"left(coalesce({sql}, ''), {SIGNATURE_INPUT_CHARS})"
        for pattern, replacement in SIGNATURE_RULES:
            sql = f"regexp_replace({sql}, {_literal(pattern)}, {_literal(replacement)}, 'g')"
        return f"left(btrim({sql}, ' '), {SIGNATURE_CHARS})", list(params)


class UnixMicros(Func):
    """A timestamp as microseconds since the epoch (``EXTRACT`` is exact: numeric)."""

    template = "(EXTRACT(EPOCH FROM %(expressions)s) * 1000000)::bigint"
    output_field = BigIntegerField()


class PostgresStore(PostgresConsume, Store):
    appends_one: ClassVar[bool] = True
    _FREE_CURSOR_LOCK: ClassVar[str] = " FOR UPDATE OF c SKIP LOCKED"
    _SWEEP_LOCK: ClassVar[str] = " FOR NO KEY UPDATE SKIP LOCKED"
    _PAYLOAD_BYTES: ClassVar[str] = "octet_length(payload)"

    def lock_queue_ids(self, ids: Sequence[int], *, exclusive: bool = False) -> set[int]:
        if not ids:
            return set()
        mode = "UPDATE" if exclusive else "KEY SHARE"
        with connection.cursor() as cur:
            cur.execute(f"SELECT id FROM queenadmin_queue WHERE id = ANY(%s) ORDER BY id FOR {mode}", [list(ids)])
            return {int(row[0]) for row in cur.fetchall()}

    def lock_queues_by_name(self, names: Sequence[str]) -> list[QueueRow]:
        # One locking read (FOR KEY SHARE skips a row deleted meanwhile), not
        # a read and then a lock: bench/transactions.py measured the pair at
        # 11% of a guarded transaction's server CPU.
        if not names:
            return []
        with connection.cursor() as cur:
            cur.execute(
                "SELECT name, id, options FROM queenadmin_queue WHERE name = ANY(%s) ORDER BY id FOR KEY SHARE",
                [list(names)],
            )
            rows = cur.fetchall()
        return [(n, i, options_of(o)) for n, i, o in rows]

    def lock_capped_queue(self, queue_id: int) -> None:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s, %s)", [MAX_SIZE_LOCK_CLASS, queue_id])

    def locate(self, pairs: Sequence[tuple[str, str]]) -> list[LocatedRow] | None:
        rows = pg_run(_LOCATE, [[q for q, _ in pairs], [p for _, p in pairs]])
        return [(qn, qid, options_of(o), pn, pid, nxt) for qn, qid, o, pn, pid, nxt in rows]

    def lock_partitions(self, ids: Sequence[int]) -> dict[int, int]:
        with connection.cursor() as cur:
            cur.execute(
                "SELECT id, next_offset FROM queenadmin_partition WHERE id = ANY(%s) ORDER BY id FOR NO KEY UPDATE",
                [list(ids)],
            )
            return dict(cur.fetchall())

    def recent_messages(self, pairs: Sequence[tuple[int, str]], since: datetime) -> list[RecentRow]:
        if not pairs:
            return []
        ordered = sorted(pairs)
        with connection.wrap_database_errors, server_cursor() as cur:
            cur.execute(
                RECENT,
                [[p for p, _ in ordered], [t for _, t in ordered], since],
                binary=True,
            )
            rows = cur.fetchall()
        return [(pid, txn, mid, offset, from_db_time(created)) for pid, txn, mid, offset, created in rows]

    def append_one(self, append: Append) -> tuple[str, int] | None:
        a = append
        params = [
            a.partition_id,
            a.transaction_id,
            a.dedup_after,
            a.offset,
            len(a.payload_json.encode()),
            a.now,
            a.message_id,
            a.payload_json,
            a.trace_id,
            a.queue,
            a.producer_sub,
        ]
        [(dup_mid, dup_offset, notified, updated)] = pg_run(_APPEND_ONE, params)
        if dup_mid is not None:
            return dup_mid, int(dup_offset)
        assert (notified, updated) == (1, 1), "the partition was locked and read by this transaction"
        return None

    pushes_one_committed: ClassVar[bool] = True

    def push_one_committed(self, push: LonePush) -> LonePushed | None:
        # One statement, so a transaction pooler may run it on any server
        # session (``pg_run`` prepares nothing behind one).
        assert not connection.in_atomic_block, "an autocommit statement"
        p = push
        params = [
            p.queue,
            p.partition,
            p.transaction_id,
            p.dedup,
            p.message_id,
            p.payload_json,
            p.trace_id,
            p.producer_sub,
            p.now,
        ]
        [(verdict, found_id, offset)] = pg_run(_PUSH_ONE, params)
        if verdict == "general":
            return None
        if verdict == "duplicate":
            return LonePushed("duplicate", found_id, int(offset))
        assert verdict == "queued", verdict
        return LonePushed("queued", p.message_id, int(offset))

    def write_messages(
        self, rows: Sequence[MessageRow], partitions: dict[int, tuple[int, int]], now: datetime, queues: Sequence[str]
    ) -> None:
        sql, params = _write_statement(rows, partitions, now, queues, None, None)
        with connection.wrap_database_errors, server_cursor() as cur:
            cur.execute(sql, params, binary=True)

    def write_new_messages(
        self,
        rows: Sequence[MessageRow],
        partitions: dict[int, tuple[int, int]],
        now: datetime,
        queues: Sequence[str],
        probe: Sequence[tuple[int, str]],
        since: datetime,
    ) -> list[RecentRow]:
        # The dedup read and the write in one statement (one round trip, not
        # two): the read runs first, and any row it finds stops the writes.
        sql, params = _write_statement(rows, partitions, now, queues, sorted(probe), since)
        with connection.wrap_database_errors, server_cursor() as cur:
            cur.execute(sql, params, binary=True)
            found = cur.fetchall()
        return [
            (pid, txn, mid, offset, from_db_time(created))
            for pid, txn, mid, offset, created in found
            if pid is not None
        ]

    def error_signature(self, column: str) -> Func:
        return ErrorSignature(F(column))

    def unix_micros(self, column: str) -> Func:
        return UnixMicros(F(column))

    def notify(self, names: Sequence[str]) -> None:
        # PostgreSQL delivers a NOTIFY at commit and drops it on rollback.
        with connection.cursor() as cur:
            cur.execute(f"SELECT pg_notify('{CHANNEL}', q) FROM unnest(%s::text[]) AS q", [list(names)])

    def listen_params(self) -> dict[str, Any] | None:
        # None behind a transaction pooler without DATABASE_LISTEN_URL: the
        # waiters' re-check then polls (wakeups.Hub).
        return listen_params()

    async def listen(self, params: dict[str, Any], *, ready: Callable[[], None], woken: Callable[[str], None]) -> None:
        import asyncio

        import psycopg
        from psycopg import pq

        conn = await psycopg.AsyncConnection.connect(**params, autocommit=True)
        async with conn:
            await conn.execute(f"LISTEN {CHANNEL}")
            ready()
            # The socket watched for as long as it listens, read by libpq
            # when readable (what psycopg's ``notifies()`` does per batch):
            # its generator adds and removes the reader and makes a future
            # for each batch, and every ack that frees a partition sends one,
            # so it was ~7% of the server CPU of pop-1 (bench/README.md).
            pgconn = conn.pgconn
            encoding = conn.info.encoding
            loop = asyncio.get_running_loop()
            lost: asyncio.Future[None] = loop.create_future()

            def readable() -> None:
                try:
                    pgconn.consume_input()
                    while (note := pgconn.notifies()) is not None:
                        woken(note.extra.decode(encoding))
                    if pgconn.status != pq.ConnStatus.OK:
                        raise psycopg.OperationalError("the listening connection was lost")
                except Exception as exc:
                    if not lost.done():
                        lost.set_exception(exc)

            fd = pgconn.socket
            loop.add_reader(fd, readable)
            # Whatever libpq holds already, read with the LISTEN's answer.
            readable()
            try:
                await lost
            finally:
                loop.remove_reader(fd)

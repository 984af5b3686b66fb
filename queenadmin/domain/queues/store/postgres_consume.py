"""The single pop and the completed ack on PostgreSQL, one statement each.

``PostgresStore`` takes these from ``PostgresConsume``: each is one
autocommit statement (one round trip, no BEGIN or COMMIT), which takes
the same row locks in the same order as the transactional path of
``consume/`` (the queue row ``FOR KEY SHARE``, then cursors ``FOR
UPDATE``, a claim's with ``SKIP LOCKED``) and writes the same columns.
Every case they do not cover is reported, with nothing changed, and the
caller takes the transactional path.

Both run prepared (``db.pg_run``): planning either costs PostgreSQL more
than running it (bench/README.md, "Where the time goes"). Every value
reaches them through a one-row ``MATERIALIZED`` CTE or ``unnest``, so a
custom plan is the generic one; each table is reached by an index equal
on its leading column from a one-row outer side. On tables analyzed while
nearly empty that plan is sequential scans (measured); it lasts until the
table is analyzed again or the connection is replaced (``CONN_MAX_AGE``),
as for the push's prepared ``_APPEND_ONE``, which reads the same table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any, ClassVar, cast

from queenadmin.domain.queues.store.base import CHANNEL, AckVerdict, ClaimedRow, CompletedAcks, OneClaim
from queenadmin.plumbing.db import from_db_time, pg_run

#: One partition's claim. ``ok`` is false (take the transactional path)
#: when the queue is missing, has ``delayedProcessing`` or
#: ``windowBuffer`` or a ``leaseTime`` that is no number, the group is
#: unregistered or conflating, or a candidate partition has no cursor for
#: the group. ``l`` locks the least recently claimed free cursor (skipping
#: those another claim holds; the lock re-checks the lease and the offsets
#: on the newest row version). A claim whose offsets went out before
#: (``delivery_runs`` left above the head) or that finds no stored message
#: in its range (deleted ones, DLQ replays for another group) writes
#: nothing and answers status 2 as well. A queue paused for the group
#: (``held``: ``operator/pause.py``) has no candidate, so the claim answers
#: empty (status 0) from the queue row it reads anyway: the pause costs no
#: statement of its own.
_CLAIM_ONE = (
    "WITH v AS MATERIALIZED (SELECT %s::text AS qn, %s::text AS grp, %s::bool AS named, %s::text AS pn,"
    " %s::bigint[] AS skip, %s::bigint AS budget, %s::text AS lease, %s::bigint AS secs, %s::bool AS auto,"
    " %s::timestamptz AS now),"
    " q AS MATERIALIZED (SELECT q.id, q.options,"
    " q.paused OR q.paused_groups @> jsonb_build_array((SELECT grp FROM v)) AS held"
    " FROM queenadmin_queue AS q WHERE q.name = (SELECT qn FROM v) FOR KEY SHARE),"
    " cand AS MATERIALIZED (SELECT p.id AS pid, c.id AS cid, c.lease_id, c.leased_until"
    " FROM q JOIN queenadmin_partition AS p ON p.queue_id = q.id"
    " LEFT JOIN queenadmin_consumercursor AS c ON c.partition_id = p.id AND c.group_name = (SELECT grp FROM v)"
    " WHERE NOT q.held AND p.next_offset - 1 > COALESCE(c.committed_offset, -1) AND p.next_offset > p.log_start"
    " AND ((SELECT pn FROM v) IS NULL OR p.name = (SELECT pn FROM v))"
    " AND NOT p.id = ANY((SELECT skip FROM v)::bigint[])),"
    " ok AS MATERIALIZED (SELECT EXISTS (SELECT FROM q"
    " WHERE COALESCE(q.options -> 'delayedProcessing', 'null') IN ('0', 'null')"
    " AND COALESCE(q.options -> 'windowBuffer', 'null') IN ('0', 'null')"
    " AND COALESCE(jsonb_typeof(q.options -> 'leaseTime'), 'null') IN ('number', 'null'))"
    " AND (NOT (SELECT named FROM v) OR EXISTS (SELECT FROM queenadmin_consumergroup AS g, q"
    " WHERE g.queue_id = q.id AND g.name = (SELECT grp FROM v) AND NOT g.conflation))"
    " AND NOT EXISTS (SELECT FROM cand WHERE cid IS NULL) AS ok),"
    " l AS MATERIALIZED (SELECT c.id, c.committed_offset, c.delivery_runs, p.id AS pid, p.name, p.next_offset,"
    " GREATEST(c.committed_offset, p.log_start - 1) AS head"
    " FROM queenadmin_consumercursor AS c JOIN queenadmin_partition AS p ON p.id = c.partition_id"
    " WHERE (SELECT ok FROM ok) AND c.id IN (SELECT cid FROM cand)"
    " AND (c.lease_id IS NULL OR c.leased_until <= (SELECT now FROM v))"
    " AND p.next_offset - 1 > c.committed_offset AND p.next_offset > p.log_start"
    " ORDER BY c.last_claim_at ASC NULLS FIRST, p.id LIMIT 1 FOR UPDATE OF c SKIP LOCKED),"
    " r AS MATERIALIZED (SELECT l.*, l.head + 1 AS first, l.head + LEAST((SELECT budget FROM v), l.next_offset - 1 - l.head)"
    " AS last FROM l WHERE NOT EXISTS (SELECT FROM jsonb_array_elements(l.delivery_runs) AS e"
    " WHERE (e ->> 1)::bigint > l.head)),"
    " m AS MATERIALIZED (SELECT m.msg_offset, m.transaction_id, m.message_id, m.payload, m.trace_id, m.created_at,"
    " m.producer_sub"
    " FROM r JOIN queenadmin_message AS m ON m.partition_id = r.pid AND m.msg_offset >= r.first"
    " AND m.msg_offset <= r.last WHERE m.for_group IS NULL OR m.for_group = (SELECT grp FROM v)),"
    " mm AS (SELECT count(*) AS n, max(msg_offset) AS top FROM m),"
    " u AS (UPDATE queenadmin_consumercursor AS c SET last_claim_at = v.now, delivered = c.delivered + mm.n,"
    " committed_offset = CASE WHEN v.auto THEN mm.top ELSE r.head END,"
    " start_offset = c.start_offset + (r.head - r.committed_offset), batch_last = mm.top,"
    " lease_id = CASE WHEN v.auto THEN c.lease_id ELSE v.lease END,"
    " leased_until = CASE WHEN v.auto THEN c.leased_until ELSE v.now + make_interval(secs => COALESCE(v.secs,"
    " (SELECT CASE WHEN trunc((q.options ->> 'leaseTime')::numeric) > 0"
    " THEN trunc((q.options ->> 'leaseTime')::numeric) ELSE 60 END FROM q))) END,"
    " delivery_runs = CASE WHEN v.auto THEN '[]'::jsonb ELSE jsonb_build_array(jsonb_build_array(r.first, mm.top, 1)) END,"
    " retry_count = CASE WHEN v.auto THEN 0 ELSE c.retry_count END,"
    " acked = c.acked + CASE WHEN v.auto THEN mm.n ELSE 0 END"
    " FROM v, r, mm WHERE c.id = r.id AND mm.n > 0 AND c.committed_offset = r.committed_offset RETURNING c.id),"
    " t AS (SELECT min(leased_until) AS until FROM cand"
    " WHERE lease_id IS NOT NULL AND leased_until > (SELECT now FROM v))"
    " SELECT 1, r.pid, r.name, m.msg_offset, m.transaction_id, m.message_id, m.payload, m.trace_id, m.created_at,"
    " (SELECT until FROM t), m.producer_sub FROM r, m WHERE EXISTS (SELECT FROM u)"
    " UNION ALL SELECT CASE WHEN NOT (SELECT ok FROM ok) OR EXISTS (SELECT FROM l) THEN 2 ELSE 0 END,"
    " NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, (SELECT until FROM t), NULL"
    " WHERE NOT EXISTS (SELECT FROM u) ORDER BY 4"
)

#: ``completed`` acknowledgments, a JSON array of [transactionId, partition
#: id, lease id, group] (their index is their position). Queue rows ``FOR KEY SHARE`` by id, then the named cursors
#: ``FOR UPDATE`` by (partition, group), as ``consume.queue_ack_in_txn``.
#: Each item is judged on its cursor as locked (``cls``), each cursor
#: moves to its highest applied offset (``u``), and the pops of queues
#: with messages left after a released lease are notified (``n``). A named
#: cursor that does not exist writes nothing: its verdict is ``general``.
_ACK_COMPLETED = (
    "WITH i AS MATERIALIZED (SELECT (x.n - 1)::int AS idx, x.e ->> 0 AS txn, (x.e ->> 1)::bigint AS pid,"
    " x.e ->> 2 AS lease, x.e ->> 3 AS grp FROM jsonb_array_elements(%s::jsonb) WITH ORDINALITY AS x(e, n)),"
    " v AS MATERIALIZED (SELECT %s::timestamptz AS now),"
    " qs AS MATERIALIZED (SELECT q.id, q.name FROM queenadmin_queue AS q WHERE q.id IN"
    " (SELECT p.queue_id FROM queenadmin_partition AS p WHERE p.id IN (SELECT pid FROM i)) ORDER BY q.id FOR KEY SHARE),"
    " p AS MATERIALIZED (SELECT p.id, qs.name AS qname, p.next_offset, p.log_start"
    " FROM queenadmin_partition AS p JOIN qs ON qs.id = p.queue_id WHERE p.id IN (SELECT pid FROM i)),"
    " k AS MATERIALIZED (SELECT c.id, c.partition_id, c.group_name, c.committed_offset, c.lease_id, c.leased_until,"
    " c.batch_last, c.delivery_runs FROM queenadmin_consumercursor AS c"
    " WHERE (c.partition_id, c.group_name) IN (SELECT i.pid, i.grp FROM i JOIN p ON p.id = i.pid)"
    " ORDER BY c.partition_id, c.group_name FOR UPDATE),"
    " kk AS MATERIALIZED (SELECT k.*,"
    " CASE WHEN k.lease_id <> '' AND k.leased_until > (SELECT now FROM v) THEN k.lease_id END AS live,"
    " GREATEST(k.committed_offset, COALESCE((SELECT max((e ->> 1)::bigint)"
    " FROM jsonb_array_elements(k.delivery_runs) AS e), -1)) AS delivered_last FROM k),"
    " cls AS MATERIALIZED (SELECT i.idx, kk.id AS cid, o.off, CASE WHEN p.id IS NULL THEN 'no_partition'"
    " WHEN kk.id IS NULL THEN 'general' WHEN o.off IS NULL THEN 'unresolvable'"
    " WHEN o.off <= kk.committed_offset THEN 'noop'"
    " WHEN i.lease IS NOT NULL AND (i.lease IS DISTINCT FROM kk.live OR o.off > kk.batch_last) THEN 'bad_lease'"
    " WHEN o.off > kk.delivered_last THEN 'unresolvable' ELSE 'applied' END AS verdict"
    " FROM i LEFT JOIN p ON p.id = i.pid LEFT JOIN kk ON kk.partition_id = i.pid AND kk.group_name = i.grp"
    " LEFT JOIN LATERAL (SELECT COALESCE(min(m.msg_offset) FILTER (WHERE m.msg_offset > kk.committed_offset),"
    " max(m.msg_offset)) AS off FROM queenadmin_message AS m"
    " WHERE p.id IS NOT NULL AND m.partition_id = i.pid AND m.transaction_id = i.txn) AS o ON true),"
    " a AS (SELECT cid, max(off) AS top FROM cls WHERE verdict = 'applied' GROUP BY cid),"
    " u AS (UPDATE queenadmin_consumercursor AS c SET committed_offset = a.top, retry_count = 0,"
    " delivery_runs = COALESCE((SELECT jsonb_agg(jsonb_build_array(GREATEST((e ->> 0)::bigint, a.top + 1),"
    " (e ->> 1)::bigint, (e ->> 2)::bigint) ORDER BY x.n) FROM jsonb_array_elements(k.delivery_runs)"
    " WITH ORDINALITY AS x(e, n) WHERE (e ->> 1)::bigint > a.top), '[]'::jsonb),"
    " start_offset = c.start_offset + GREATEST(LEAST(a.top, p.log_start - 1) - k.committed_offset, 0),"
    " lease_id = CASE WHEN a.top >= k.batch_last THEN NULL ELSE c.lease_id END,"
    " leased_until = CASE WHEN a.top >= k.batch_last THEN NULL ELSE c.leased_until END,"
    " batch_last = GREATEST(c.batch_last, a.top), acked = c.acked + (a.top - k.committed_offset)"
    " FROM a JOIN k ON k.id = a.cid JOIN p ON p.id = k.partition_id"
    " WHERE c.id = a.cid AND NOT EXISTS (SELECT FROM cls WHERE verdict = 'general')"
    " RETURNING c.id, a.top >= k.batch_last AND k.lease_id IS NOT NULL AS released,"
    " CASE WHEN a.top >= k.batch_last AND a.top < p.next_offset - 1 THEN p.qname END AS woken),"
    " w AS MATERIALIZED (SELECT DISTINCT woken FROM u WHERE woken IS NOT NULL),"
    f" n AS (SELECT pg_notify('{CHANNEL}', woken) FROM w)"
    " SELECT cls.verdict, cls.verdict = 'applied' AND COALESCE(u.released, false), (SELECT count(*) FROM n),"
    " (SELECT array_agg(woken ORDER BY woken) FROM w) FROM cls LEFT JOIN u ON u.id = cls.cid ORDER BY cls.idx"
)


class PostgresConsume:
    """``Store.claim_one`` and ``Store.ack_completed`` for PostgreSQL."""

    one_statement_consume: ClassVar[bool] = True

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
        from queenadmin.models.queues import QUEUE_MODE

        params: list[Any] = [
            queue,
            group,
            group != QUEUE_MODE,
            partition,
            list(skip),
            budget,
            lease_id,
            lease_seconds,
            auto_ack,
            now,
        ]
        rows = pg_run(_CLAIM_ONE, params)
        status = rows[0][0]
        if status == 2:
            return OneClaim("general")
        if status == 0:
            return OneClaim("empty", retry_at=from_db_time(rows[0][9]))
        messages = tuple(
            cast(ClaimedRow, (offset, txn, mid, payload, trace, from_db_time(created), sub))
            for _, _, _, offset, txn, mid, payload, trace, created, _, sub in rows
        )
        return OneClaim("claimed", int(rows[0][1]), rows[0][2], messages, from_db_time(rows[0][9]))

    def ack_completed(
        self, *, items: Sequence[tuple[str, int, str | None, str]], now: datetime
    ) -> CompletedAcks | None:
        # One JSON text, not five arrays: psycopg dumps an array element by
        # element in Python (about 5 us per acknowledgment of a batch).
        params: list[Any] = [json.dumps(items, separators=(",", ":")), now]
        rows = pg_run(_ACK_COMPLETED, params)
        if any(verdict == "general" for verdict, _, _, _ in rows):
            return None
        woken = tuple(rows[0][3] or ()) if rows else ()
        verdicts = tuple((cast(AckVerdict, verdict), bool(released)) for verdict, released, _, _ in rows)
        return CompletedAcks(verdicts, woken)

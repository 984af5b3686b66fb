"""Ephemeral rows on PostgreSQL: the queue row locked, bulk writes through arrays.

The content tables are ``UNLOGGED`` (migration 0018): no WAL, so a commit
that touched only them does not wait for a WAL flush, and PostgreSQL
empties them after a crash.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.db import connection

from queenadmin.domain.ephemeral.store.base import (
    _QUEUE_COLUMNS,
    CFG,
    C,
    L,
    M,
    P,
    Q,
    QueueRow,
    Store,
    _queue_row,
    _rows,
    _run,
)
from queenadmin.plumbing.db import pg_run

#: Ends the group's live leases of the seqs an ack names (params: queue,
#: group, seqs, now_ms); answers (seq, partition) of each lease it ended.
_END_LIVE_LEASES = (
    f"DELETE FROM {L} WHERE queue = %s AND consumer_group = %s AND seq = ANY(%s::bigint[]) "
    'AND expires_at_ms > %s RETURNING seq, "partition"'
)


class PostgresStore(Store):
    """Hot statements run through ``pg_run``, bound on the server. Only the
    queue row's read by key is kept prepared: prepared, the pop's and the
    ack's statements soon got generic plans that cost 135 us of PostgreSQL
    CPU per message against 39 (bench/ephemeral.py)."""

    FOR_UPDATE = " FOR UPDATE"

    def claim_queue(self, queue: str, *, epoch: int, now_ms: int, create: bool) -> QueueRow | None:
        if create:
            return super().claim_queue(queue, epoch=epoch, now_ms=now_ms, create=create)
        assert connection.in_atomic_block
        rows = pg_run(f"SELECT {_QUEUE_COLUMNS} FROM {Q} WHERE queue = %s FOR UPDATE", [queue])
        return _queue_row(rows[0]) if rows else None

    def insert_messages(
        self, queue: str, partition: str, first_seq: int, payloads: Sequence[str], sizes: Sequence[int], now_ms: int
    ) -> None:
        assert connection.in_atomic_block
        pg_run(
            f'INSERT INTO {M} (queue, seq, "partition", payload, size, created_at_ms) '
            "SELECT %s, %s + n - 1, %s, p, z, %s FROM unnest(%s::text[], %s::int[]) WITH ORDINALITY AS t(p, z, n)",
            [queue, first_seq, partition, now_ms, list(payloads), list(sizes)],
        )

    def add_leases(self, queue: str, group: str, items: Sequence[tuple[int, str]], expires_at_ms: int) -> None:
        assert connection.in_atomic_block
        if not items:
            return
        _run(
            f'INSERT INTO {L} (queue, seq, consumer_group, "partition", attempts, expires_at_ms) '
            "SELECT %s, s, %s, p, 1, %s FROM unnest(%s::bigint[], %s::text[]) AS t(s, p) "
            "ON CONFLICT (queue, seq, consumer_group) DO UPDATE SET attempts = 1, expires_at_ms = EXCLUDED.expires_at_ms",
            [queue, group, expires_at_ms, [s for s, _ in items], [p for _, p in items]],
        )

    def fresh(self, queue: str, group: str, partition: str | None, limit: int) -> list[tuple[int, str, str]]:
        if partition is not None:
            return self._fresh_in(queue, group, partition, limit)
        # One index range per partition (LATERAL), not a sort of the ring.
        rows = _rows(
            f'SELECT x.seq, x."partition", x.payload FROM {P} p CROSS JOIN LATERAL ('
            f'SELECT m.seq, m."partition", m.payload FROM {M} m WHERE m.queue = p.queue AND m."partition" = p."partition" '
            f"AND m.seq > COALESCE((SELECT c.delivered_seq FROM {C} c WHERE c.queue = p.queue "
            'AND c.consumer_group = %s AND c."partition" = p."partition"), 0) ORDER BY m.seq LIMIT %s) x '
            'WHERE p.queue = %s ORDER BY p."partition", x.seq LIMIT %s',
            [group, limit, queue, limit],
        )
        return [(int(s), str(p), str(d)) for s, p, d in rows]

    def advance(self, queue: str, group: str, through: dict[str, int]) -> None:
        assert connection.in_atomic_block
        # One statement over arrays: psycopg's executemany (a pipeline) cost
        # about 6 ms even for one row.
        _run(
            f'INSERT INTO {C} (queue, consumer_group, "partition", delivered_seq, skipped) '
            "SELECT %s, %s, p, s, 0 FROM unnest(%s::text[], %s::bigint[]) AS t(p, s) "
            'ON CONFLICT (queue, consumer_group, "partition") DO UPDATE SET delivered_seq = EXCLUDED.delivered_seq',
            [queue, group, list(through), list(through.values())],
        )

    def renew(self, queue: str, group: str, seqs: Sequence[int], expires_at_ms: int, *, bump: bool) -> None:
        assert connection.in_atomic_block
        if seqs:
            _run(
                f"UPDATE {L} SET expires_at_ms = %s, attempts = attempts + %s "
                "WHERE queue = %s AND consumer_group = %s AND seq = ANY(%s::bigint[])",
                [expires_at_ms, 1 if bump else 0, queue, group, list(seqs)],
            )

    def leases(self, queue: str, group: str, seqs: Sequence[int]) -> dict[int, tuple[str, int, int]]:
        if not seqs:
            return {}
        rows = _rows(
            f'SELECT seq, "partition", attempts, expires_at_ms FROM {L} '
            "WHERE queue = %s AND consumer_group = %s AND seq = ANY(%s::bigint[])",
            [queue, group, list(seqs)],
        )
        return {int(s): (str(p), int(a), int(e)) for s, p, a, e in rows}

    def end_leases(self, queue: str, group: str, seqs: Sequence[int]) -> None:
        assert connection.in_atomic_block
        if seqs:
            _run(
                f"DELETE FROM {L} WHERE queue = %s AND consumer_group = %s AND seq = ANY(%s::bigint[])",
                [queue, group, list(seqs)],
            )

    # Fused statements: a pop or an ack is mostly round trips to the server,
    # so each of these does in one statement what the base class does in
    # several (bench/ephemeral.py).

    def claim_for_pop(
        self, queue: str, group: str, partition: str | None, *, epoch: int, now_ms: int
    ) -> tuple[QueueRow, bool]:
        assert connection.in_atomic_block
        rows = pg_run(
            f'WITH known AS (INSERT INTO {C} (queue, consumer_group, "partition", delivered_seq, skipped) '
            'VALUES (%s, %s, %s, 0, 0) ON CONFLICT (queue, consumer_group, "partition") DO NOTHING), '
            f'ring AS (INSERT INTO {P} (queue, "partition") SELECT %s, %s WHERE %s ON CONFLICT DO NOTHING) '
            f"INSERT INTO {Q} ({_QUEUE_COLUMNS}) "
            f"VALUES (%s, %s, COALESCE((SELECT options_json FROM {CFG} WHERE queue = %s), ''), 0, 0, 0, 0, 0, 0, %s) "
            "ON CONFLICT (queue) DO UPDATE SET touched_at_ms = EXCLUDED.touched_at_ms "
            f"RETURNING {_QUEUE_COLUMNS}, EXISTS (SELECT 1 FROM {L} WHERE queue = %s AND consumer_group = %s "
            "AND expires_at_ms <= %s)",
            [
                queue,
                group,
                partition if partition is not None else "",
                queue,
                partition or "",
                partition is not None,
                queue,
                epoch,
                queue,
                now_ms,
                queue,
                group,
                now_ms,
            ],
            prepare=False,
        )
        return _queue_row(rows[0][:-1]), bool(rows[0][-1])

    def deliver(self, queue: str, group: str, items: Sequence[tuple[int, str]], lease_until_ms: int | None) -> None:
        assert connection.in_atomic_block
        if not items:
            return
        through: dict[str, int] = {}
        for seq, part in items:
            through[part] = seq
        leased = items if lease_until_ms is not None else []
        _run(
            f'WITH moved AS (INSERT INTO {C} (queue, consumer_group, "partition", delivered_seq, skipped) '
            "SELECT %s, %s, p, s, 0 FROM unnest(%s::text[], %s::bigint[]) AS t(p, s) "
            'ON CONFLICT (queue, consumer_group, "partition") DO UPDATE SET delivered_seq = EXCLUDED.delivered_seq) '
            f'INSERT INTO {L} (queue, seq, consumer_group, "partition", attempts, expires_at_ms) '
            "SELECT %s, s, %s, p, 1, %s FROM unnest(%s::bigint[], %s::text[]) AS t(s, p) "
            "ON CONFLICT (queue, seq, consumer_group) DO UPDATE SET attempts = 1, expires_at_ms = EXCLUDED.expires_at_ms",
            [
                queue,
                group,
                list(through),
                list(through.values()),
                queue,
                group,
                lease_until_ms or 0,
                [s for s, _ in leased],
                [p for _, p in leased],
            ],
        )

    def ack_completed(self, queue: str, group: str, seqs: Sequence[int], now_ms: int) -> dict[int, str]:
        assert connection.in_atomic_block
        if not seqs:
            return {}
        rows = _rows(_END_LIVE_LEASES, [queue, group, list(seqs), now_ms])
        return {int(s): str(p) for s, p in rows}

    def trim_counted(self, queue: str, partitions: Sequence[str]) -> tuple[int, int]:
        assert connection.in_atomic_block
        count = size = 0
        for partition in partitions:
            rows = _rows(
                f'WITH gone AS (DELETE FROM {M} WHERE queue = %s AND "partition" = %s AND seq <= ('
                "SELECT MIN(x) FROM ("
                f"SELECT COALESCE(c.delivered_seq, 0) AS x FROM (SELECT DISTINCT consumer_group FROM {C} WHERE queue = %s) g "
                f'LEFT JOIN {C} c ON c.queue = %s AND c.consumer_group = g.consumer_group AND c."partition" = %s '
                f'UNION ALL SELECT MIN(seq) - 1 FROM {L} WHERE queue = %s AND "partition" = %s) t) RETURNING size), '
                "total AS (SELECT COUNT(*) AS n, COALESCE(SUM(size), 0) AS b FROM gone) "
                f'UPDATE {Q} SET depth = depth - total.n, "bytes" = "bytes" - total.b FROM total '
                "WHERE queue = %s RETURNING total.n, total.b",
                [queue, partition, queue, queue, partition, queue, partition, queue],
            )
            if rows:
                count, size = count + int(rows[0][0]), size + int(rows[0][1])
        return count, size

    def take_fresh(
        self, queue: str, group: str, partition: str | None, limit: int, lease_until_ms: int | None
    ) -> list[tuple[int, str, str]]:
        assert connection.in_atomic_block
        if partition is not None:
            found = (
                f'SELECT seq, "partition", payload FROM {M} WHERE queue = %s AND "partition" = %s AND seq > '
                f"COALESCE((SELECT delivered_seq FROM {C} WHERE queue = %s AND consumer_group = %s "
                'AND "partition" = %s), 0) ORDER BY seq LIMIT %s'
            )
            found_params: list[object] = [queue, partition, queue, group, partition, limit]
        else:
            found = (
                f'SELECT x.seq, x."partition", x.payload FROM {P} p CROSS JOIN LATERAL ('
                f'SELECT m.seq, m."partition", m.payload FROM {M} m WHERE m.queue = p.queue AND m."partition" = p."partition" '
                f"AND m.seq > COALESCE((SELECT c.delivered_seq FROM {C} c WHERE c.queue = p.queue "
                'AND c.consumer_group = %s AND c."partition" = p."partition"), 0) ORDER BY m.seq LIMIT %s) x '
                'WHERE p.queue = %s ORDER BY p."partition", x.seq LIMIT %s'
            )
            found_params = [group, limit, queue, limit]
        # The caller holds the queue's row, so this statement's snapshot
        # already has every earlier delivery of the queue.
        rows = pg_run(
            f"WITH found AS MATERIALIZED ({found}), "
            f'moved AS (INSERT INTO {C} (queue, consumer_group, "partition", delivered_seq, skipped) '
            'SELECT %s, %s, "partition", MAX(seq), 0 FROM found GROUP BY "partition" '
            'ON CONFLICT (queue, consumer_group, "partition") DO UPDATE SET delivered_seq = EXCLUDED.delivered_seq), '
            f'leased AS (INSERT INTO {L} (queue, seq, consumer_group, "partition", attempts, expires_at_ms) '
            'SELECT %s, seq, %s, "partition", 1, %s FROM found WHERE %s '
            "ON CONFLICT (queue, seq, consumer_group) DO UPDATE SET attempts = 1, expires_at_ms = EXCLUDED.expires_at_ms) "
            'SELECT seq, "partition", payload FROM found ORDER BY "partition", seq',
            [*found_params, queue, group, queue, group, lease_until_ms or 0, lease_until_ms is not None],
            prepare=False,
        )
        return [(int(s), str(p), str(d)) for s, p, d in rows]

    def ack_and_trim(self, queue: str, group: str, seqs: Sequence[int], now_ms: int) -> dict[int, str]:
        assert connection.in_atomic_block
        if not seqs:
            return {}
        # One statement: end the leases, then drop what no group needs any
        # more in their partitions (leases ended here do not hold it: the
        # snapshot still has them, so they are left out by seq).
        rows = pg_run(
            f"WITH ended AS ({_END_LIVE_LEASES}), "
            'floors AS (SELECT e."partition", (SELECT MIN(x) FROM ('
            f"SELECT COALESCE(c.delivered_seq, 0) AS x FROM (SELECT DISTINCT consumer_group FROM {C} WHERE queue = %s) g "
            f'LEFT JOIN {C} c ON c.queue = %s AND c.consumer_group = g.consumer_group AND c."partition" = e."partition" '
            f'UNION ALL SELECT MIN(l.seq) - 1 FROM {L} l WHERE l.queue = %s AND l."partition" = e."partition" '
            "AND l.seq NOT IN (SELECT seq FROM ended)) t) AS floor "
            'FROM (SELECT DISTINCT "partition" FROM ended) e), '
            f'gone AS (DELETE FROM {M} m USING floors f WHERE m.queue = %s AND m."partition" = f."partition" '
            "AND m.seq <= f.floor RETURNING m.size), "
            "total AS (SELECT COUNT(*) AS n, COALESCE(SUM(size), 0) AS b FROM gone), "
            f'counted AS (UPDATE {Q} SET depth = depth - total.n, "bytes" = "bytes" - total.b FROM total '
            "WHERE queue = %s AND total.n > 0) "
            'SELECT seq, "partition" FROM ended',
            [queue, group, list(seqs), now_ms, queue, queue, queue, queue, queue],
            prepare=False,
        )
        return {int(s): str(p) for s, p in rows}

"""The ephemeral store interface and the SQL both databases share.

Every statement of the ephemeral queues is here; ``postgres.py`` and
``sqlite.py`` change only what differs (the row lock, bulk inserts). The
rules (bounds, leases, what an ack does) are in ``ephemeral.ops``; writes
assert the caller's transaction, and the caller holds the queue's row
(``claim_queue``) before touching its contents.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction

Q = "queenadmin_ephemeralqueue"
M = "queenadmin_ephemeralmessage"
P = "queenadmin_ephemeralpartition"
C = "queenadmin_ephemeralcursor"
L = "queenadmin_ephemerallease"
CFG = "queenadmin_ephemeralconfig"

_QUEUE_COLUMNS = (
    'queue, epoch, options_json, last_seq, depth, "bytes", drops_bounds, drops_ttl, drops_retry, touched_at_ms'
)


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One queue's live state (``EphemeralQueue``)."""

    queue: str
    epoch: int
    #: "" for an implicit queue.
    options_json: str
    last_seq: int
    depth: int
    bytes: int
    drops_bounds: int
    drops_ttl: int
    drops_retry: int
    touched_at_ms: int


@dataclass(frozen=True, slots=True)
class Delivery:
    """A message handed to a group: fresh (``attempts`` 1) or a redelivery."""

    seq: int
    partition: str
    payload: str
    attempts: int


@dataclass(frozen=True, slots=True)
class Due:
    """An expired lease: ``payload`` None when the message is gone."""

    seq: int
    partition: str
    attempts: int
    payload: str | None


@dataclass(frozen=True, slots=True)
class PartitionGauge:
    partition: str
    pending: int
    bytes: int


@dataclass(frozen=True, slots=True)
class GroupGauge:
    group: str
    pending: int
    skipped: int


def _rows(sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _run(sql: str, params: Sequence[Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return int(cursor.rowcount)


def _queue_row(row: Sequence[Any]) -> QueueRow:
    queue, epoch, options_json, *counters = row
    last_seq, depth, size, bounds, ttl, retry, touched = (int(v) for v in counters)
    return QueueRow(str(queue), int(epoch), str(options_json), last_seq, depth, size, bounds, ttl, retry, touched)


class Store:
    """Ephemeral rows on one database. Writes assert a transaction."""

    #: Appended to the row read of ``claim_queue``: the row lock where there is one.
    FOR_UPDATE = ""

    # ---------------------------------------------------------------- queues

    def claim_queue(self, queue: str, *, epoch: int, now_ms: int, create: bool) -> QueueRow | None:
        """The queue's row, locked until commit; made (with ``epoch``) when
        ``create`` and missing, copying a declared config's options."""
        assert connection.in_atomic_block
        if create:
            rows = _rows(
                f"INSERT INTO {Q} ({_QUEUE_COLUMNS}) "
                f"VALUES (%s, %s, COALESCE((SELECT options_json FROM {CFG} WHERE queue = %s), ''), 0, 0, 0, 0, 0, 0, %s) "
                f"ON CONFLICT (queue) DO UPDATE SET touched_at_ms = EXCLUDED.touched_at_ms "
                f"RETURNING {_QUEUE_COLUMNS}",
                [queue, epoch, queue, now_ms],
            )
        else:
            rows = _rows(f"SELECT {_QUEUE_COLUMNS} FROM {Q} WHERE queue = %s{self.FOR_UPDATE}", [queue])
        return _queue_row(rows[0]) if rows else None

    def claim_for_pop(
        self, queue: str, group: str, partition: str | None, *, epoch: int, now_ms: int
    ) -> tuple[QueueRow, bool]:
        """``claim_queue`` (made if missing) for a pop of ``group``: also
        make the group known (its cursor of ``partition``, or of "") and the
        named partition's ring. Returns the row and whether the group holds
        an expired lease."""
        row = self.claim_queue(queue, epoch=epoch, now_ms=now_ms, create=True)
        assert row is not None
        self.register_group(queue, group, partition if partition is not None else "")
        if partition is not None:
            self.touch_partition(queue, partition)
        due = _rows(
            f"SELECT 1 FROM {L} WHERE queue = %s AND consumer_group = %s AND expires_at_ms <= %s LIMIT 1",
            [queue, group, now_ms],
        )
        return row, bool(due)

    def update_queue(
        self,
        queue: str,
        *,
        last_seq: int,
        depth_delta: int = 0,
        bytes_delta: int = 0,
        bounds: int = 0,
        ttl: int = 0,
        retry: int = 0,
    ) -> None:
        assert connection.in_atomic_block
        _run(
            f'UPDATE {Q} SET last_seq = %s, depth = depth + %s, "bytes" = "bytes" + %s, '
            "drops_bounds = drops_bounds + %s, drops_ttl = drops_ttl + %s, drops_retry = drops_retry + %s "
            "WHERE queue = %s",
            [last_seq, depth_delta, bytes_delta, bounds, ttl, retry, queue],
        )

    def restart_queue(self, queue: str, epoch: int) -> int:
        """Empty the queue (a reset): new epoch, no messages or leases,
        every cursor at the tail. Returns the messages dropped."""
        assert connection.in_atomic_block
        dropped = _run(f"DELETE FROM {M} WHERE queue = %s", [queue])
        _run(f"DELETE FROM {L} WHERE queue = %s", [queue])
        _run(
            f"UPDATE {C} SET delivered_seq = (SELECT last_seq FROM {Q} WHERE queue = %s) WHERE queue = %s",
            [queue, queue],
        )
        _run(f'UPDATE {Q} SET epoch = %s, depth = 0, "bytes" = 0 WHERE queue = %s', [epoch, queue])
        return dropped

    def delete_queue(self, queue: str) -> bool:
        """Remove the queue's contents and state; True when it had a state row."""
        assert connection.in_atomic_block
        for table in (M, L, C, P):
            _run(f"DELETE FROM {table} WHERE queue = %s", [queue])
        return _run(f"DELETE FROM {Q} WHERE queue = %s", [queue]) > 0

    def cell_bytes(self) -> int:
        rows = _rows(f'SELECT COALESCE(SUM("bytes"), 0) FROM {Q}', [])
        return int(rows[0][0])

    def queue_rows(self) -> list[QueueRow]:
        return [_queue_row(r) for r in _rows(f"SELECT {_QUEUE_COLUMNS} FROM {Q} ORDER BY queue", [])]

    def queue_row(self, queue: str) -> QueueRow | None:
        rows = _rows(f"SELECT {_QUEUE_COLUMNS} FROM {Q} WHERE queue = %s", [queue])
        return _queue_row(rows[0]) if rows else None

    def idle_implicit(self, before_ms: int) -> list[str]:
        """Implicit queues, empty and untouched since ``before_ms``."""
        return [
            str(r[0])
            for r in _rows(
                f"SELECT queue FROM {Q} WHERE options_json = '' AND depth = 0 AND touched_at_ms < %s", [before_ms]
            )
        ]

    # ---------------------------------------------------------------- config

    def config(self, queue: str) -> tuple[str, int] | None:
        rows = _rows(f"SELECT options_json, updated_at_ms FROM {CFG} WHERE queue = %s", [queue])
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def configs(self) -> dict[str, str]:
        return {str(q): str(o) for q, o in _rows(f"SELECT queue, options_json FROM {CFG}", [])}

    def set_config(self, queue: str, options_json: str, now_ms: int) -> None:
        assert connection.in_atomic_block
        _run(
            f"INSERT INTO {CFG} (queue, options_json, updated_at_ms) VALUES (%s, %s, %s) "
            "ON CONFLICT (queue) DO UPDATE SET options_json = EXCLUDED.options_json, "
            "updated_at_ms = EXCLUDED.updated_at_ms",
            [queue, options_json, now_ms],
        )
        _run(f"UPDATE {Q} SET options_json = %s WHERE queue = %s", [options_json, queue])

    def delete_config(self, queue: str) -> bool:
        assert connection.in_atomic_block
        return _run(f"DELETE FROM {CFG} WHERE queue = %s", [queue]) > 0

    # ---------------------------------------------------------------- messages

    def insert_messages(
        self, queue: str, partition: str, first_seq: int, payloads: Sequence[str], sizes: Sequence[int], now_ms: int
    ) -> None:
        """Append ``payloads`` to the ring of ``partition`` from ``first_seq`` on."""
        raise NotImplementedError

    def expire(self, queue: str, before_ms: int) -> tuple[int, int]:
        """Drop messages created before ``before_ms``: (count, bytes)."""
        assert connection.in_atomic_block
        rows = _rows(f"DELETE FROM {M} WHERE queue = %s AND created_at_ms < %s RETURNING size", [queue, before_ms])
        return len(rows), sum(int(r[0]) for r in rows)

    def oldest(self, queue: str, limit: int) -> list[tuple[int, int]]:
        """(seq, size) of the oldest ``limit`` messages of the queue."""
        return [
            (int(s), int(z))
            for s, z in _rows(f"SELECT seq, size FROM {M} WHERE queue = %s ORDER BY seq LIMIT %s", [queue, limit])
        ]

    def created_at(self, queue: str, seq: int) -> int | None:
        rows = _rows(f"SELECT created_at_ms FROM {M} WHERE queue = %s AND seq = %s", [queue, seq])
        return int(rows[0][0]) if rows else None

    def drop_through(self, queue: str, seq: int) -> tuple[int, int]:
        """Drop the queue's messages up to ``seq`` (dropOldest): (count, bytes)."""
        assert connection.in_atomic_block
        rows = _rows(f"DELETE FROM {M} WHERE queue = %s AND seq <= %s RETURNING size", [queue, seq])
        return len(rows), sum(int(r[0]) for r in rows)

    def touch_partition(self, queue: str, partition: str) -> None:
        """Make the partition's ring if it is missing."""
        assert connection.in_atomic_block
        _run(f'INSERT INTO {P} (queue, "partition") VALUES (%s, %s) ON CONFLICT DO NOTHING', [queue, partition])

    def _fresh_in(self, queue: str, group: str, partition: str, limit: int) -> list[tuple[int, str, str]]:
        rows = _rows(
            f'SELECT seq, "partition", payload FROM {M} WHERE queue = %s AND "partition" = %s AND seq > '
            f'COALESCE((SELECT delivered_seq FROM {C} WHERE queue = %s AND consumer_group = %s AND "partition" = %s), 0) '
            "ORDER BY seq LIMIT %s",
            [queue, partition, queue, group, partition, limit],
        )
        return [(int(s), str(p), str(d)) for s, p, d in rows]

    def fresh(self, queue: str, group: str, partition: str | None, limit: int) -> list[tuple[int, str, str]]:
        """(seq, partition, payload) past the group's cursors: partitions in
        name order, FIFO in each."""
        if partition is not None:
            return self._fresh_in(queue, group, partition, limit)
        out: list[tuple[int, str, str]] = []
        for (name,) in _rows(f'SELECT "partition" FROM {P} WHERE queue = %s ORDER BY "partition"', [queue]):
            out += self._fresh_in(queue, group, str(name), limit - len(out))
            if len(out) >= limit:
                break
        return out

    def advance(self, queue: str, group: str, through: dict[str, int]) -> None:
        """Move the group's cursor of each partition to its seq."""
        assert connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.executemany(
                f'INSERT INTO {C} (queue, consumer_group, "partition", delivered_seq, skipped) VALUES (%s, %s, %s, %s, 0) '
                'ON CONFLICT (queue, consumer_group, "partition") DO UPDATE SET delivered_seq = EXCLUDED.delivered_seq',
                [(queue, group, p, s) for p, s in through.items()],
            )

    def register_group(self, queue: str, group: str, partition: str) -> None:
        """Make the group's cursor of ``partition`` (at the ring head) if missing."""
        assert connection.in_atomic_block
        _run(
            f'INSERT INTO {C} (queue, consumer_group, "partition", delivered_seq, skipped) VALUES (%s, %s, %s, 0, 0) '
            'ON CONFLICT (queue, consumer_group, "partition") DO NOTHING',
            [queue, group, partition],
        )

    def deliver(self, queue: str, group: str, items: Sequence[tuple[int, str]], lease_until_ms: int | None) -> None:
        """Move the group's cursors past ``items`` (seq, partition; FIFO per
        partition) and, unless ``lease_until_ms`` is None, lease them."""
        through: dict[str, int] = {}
        for seq, part in items:
            through[part] = seq
        if through:
            self.advance(queue, group, through)
        if lease_until_ms is not None and items:
            self.add_leases(queue, group, items, lease_until_ms)

    def take_fresh(
        self, queue: str, group: str, partition: str | None, limit: int, lease_until_ms: int | None
    ) -> list[tuple[int, str, str]]:
        """``fresh`` then ``deliver`` what it found."""
        found = self.fresh(queue, group, partition, limit)
        self.deliver(queue, group, [(seq, part) for seq, part, _ in found], lease_until_ms)
        return found

    def ack_and_trim(self, queue: str, group: str, seqs: Sequence[int], now_ms: int) -> dict[int, str]:
        """``ack_completed`` then ``trim_counted`` the partitions it touched."""
        ended = self.ack_completed(queue, group, seqs, now_ms)
        self.trim_counted(queue, sorted(set(ended.values())))
        return ended

    def ack_all_completed(
        self, queue: str, group: str, ids: Sequence[tuple[int, int]], now_ms: int
    ) -> tuple[int | None, dict[int, str]]:
        """Complete the acks ``ids`` (epoch, seq): end the group's live
        leases of the queue's current epoch and trim. Returns the current
        epoch (None: no such queue) and seq -> partition of the leases ended.
        Outermost: its own transaction."""
        with transaction.atomic(durable=True):
            row = self.claim_queue(queue, epoch=0, now_ms=0, create=False)
            if row is None:
                return None, {}
            return row.epoch, self.ack_and_trim(queue, group, sorted({s for e, s in ids if e == row.epoch}), now_ms)

    def ack_completed(self, queue: str, group: str, seqs: Sequence[int], now_ms: int) -> dict[int, str]:
        """End the group's live leases of ``seqs``; seq -> partition of those ended."""
        assert connection.in_atomic_block
        live = {seq: part for seq, (part, _, expires) in self.leases(queue, group, seqs).items() if expires > now_ms}
        self.end_leases(queue, group, list(live))
        return live

    def trim_counted(self, queue: str, partitions: Sequence[str]) -> tuple[int, int]:
        """``trim`` each partition and take what left off the queue's depth
        and bytes; returns (count, bytes)."""
        count = size = 0
        for partition in partitions:
            n, b = self.trim(queue, partition)
            count, size = count + n, size + b
        if count:
            _run(f'UPDATE {Q} SET depth = depth - %s, "bytes" = "bytes" - %s WHERE queue = %s', [count, size, queue])
        return count, size

    def trim(self, queue: str, partition: str) -> tuple[int, int]:
        """Drop what every group of the queue is done with in ``partition``:
        delivered to all (a group without a cursor there counts from the
        head) and leased to none. Returns (count, bytes)."""
        assert connection.in_atomic_block
        rows = _rows(
            f'DELETE FROM {M} WHERE queue = %s AND "partition" = %s AND seq <= ('
            f"SELECT MIN(x) FROM ("
            f"SELECT COALESCE(c.delivered_seq, 0) AS x FROM (SELECT DISTINCT consumer_group FROM {C} WHERE queue = %s) g "
            f'LEFT JOIN {C} c ON c.queue = %s AND c.consumer_group = g.consumer_group AND c."partition" = %s '
            f'UNION ALL SELECT MIN(seq) - 1 FROM {L} WHERE queue = %s AND "partition" = %s) t) '
            "RETURNING size",
            [queue, partition, queue, queue, partition, queue, partition],
        )
        return len(rows), sum(int(r[0]) for r in rows)

    # ---------------------------------------------------------------- leases

    def due(self, queue: str, group: str, partition: str | None, now_ms: int, limit: int) -> list[Due]:
        """Expired leases of the group, oldest message first."""
        part = 'AND l."partition" = %s ' if partition is not None else ""
        params: list[object] = [queue, group, now_ms, *([partition] if partition is not None else []), limit]
        rows = _rows(
            f'SELECT l.seq, l."partition", l.attempts, m.payload FROM {L} l LEFT JOIN {M} m '
            "ON m.queue = l.queue AND m.seq = l.seq "
            f"WHERE l.queue = %s AND l.consumer_group = %s AND l.expires_at_ms <= %s {part}ORDER BY l.seq LIMIT %s",
            params,
        )
        return [Due(int(s), str(p), int(a), None if d is None else str(d)) for s, p, a, d in rows]

    def add_leases(self, queue: str, group: str, items: Sequence[tuple[int, str]], expires_at_ms: int) -> None:
        """Lease fresh deliveries ``(seq, partition)`` (attempt 1)."""
        raise NotImplementedError

    def renew(self, queue: str, group: str, seqs: Sequence[int], expires_at_ms: int, *, bump: bool) -> None:
        """Set the leases' expiry; ``bump`` counts one more delivery."""
        assert connection.in_atomic_block
        if not seqs:
            return
        with connection.cursor() as cursor:
            cursor.executemany(
                f"UPDATE {L} SET expires_at_ms = %s, attempts = attempts + %s "
                "WHERE queue = %s AND seq = %s AND consumer_group = %s",
                [(expires_at_ms, 1 if bump else 0, queue, seq, group) for seq in seqs],
            )

    def leases(self, queue: str, group: str, seqs: Sequence[int]) -> dict[int, tuple[str, int, int]]:
        """seq -> (partition, attempts, expires_at_ms) of the group's live leases."""
        if not seqs:
            return {}
        marks = ", ".join(["%s"] * len(seqs))
        rows = _rows(
            f'SELECT seq, "partition", attempts, expires_at_ms FROM {L} '
            f"WHERE queue = %s AND consumer_group = %s AND seq IN ({marks})",
            [queue, group, *seqs],
        )
        return {int(s): (str(p), int(a), int(e)) for s, p, a, e in rows}

    def end_leases(self, queue: str, group: str, seqs: Sequence[int]) -> None:
        assert connection.in_atomic_block
        if not seqs:
            return
        marks = ", ".join(["%s"] * len(seqs))
        _run(f"DELETE FROM {L} WHERE queue = %s AND consumer_group = %s AND seq IN ({marks})", [queue, group, *seqs])

    def skip(self, queue: str, group: str, per_partition: dict[str, int]) -> None:
        """Count messages the group gave up on (retryLimit), per partition."""
        assert connection.in_atomic_block
        with connection.cursor() as cursor:
            cursor.executemany(
                f'UPDATE {C} SET skipped = skipped + %s WHERE queue = %s AND consumer_group = %s AND "partition" = %s',
                [(n, queue, group, p) for p, n in per_partition.items()],
            )

    # ---------------------------------------------------------------- gauges

    def partition_gauges(self, queue: str) -> list[PartitionGauge]:
        rows = _rows(
            f'SELECT p."partition", COUNT(m.seq), COALESCE(SUM(m.size), 0) FROM {P} p LEFT JOIN {M} m '
            'ON m.queue = p.queue AND m."partition" = p."partition" WHERE p.queue = %s '
            'GROUP BY p."partition" ORDER BY p."partition"',
            [queue],
        )
        return [PartitionGauge(str(p), int(n), int(b)) for p, n, b in rows]

    def group_gauges(self, queue: str) -> list[GroupGauge]:
        rows = _rows(
            f"SELECT g.consumer_group, "
            f"(SELECT COUNT(*) FROM {M} m LEFT JOIN {C} c ON c.queue = m.queue AND c.consumer_group = g.consumer_group "
            f'AND c."partition" = m."partition" WHERE m.queue = %s AND m.seq > COALESCE(c.delivered_seq, 0)), '
            f"SUM(g.skipped) FROM {C} g WHERE g.queue = %s GROUP BY g.consumer_group ORDER BY 1",
            [queue, queue],
        )
        return [GroupGauge(str(g), int(n), int(s)) for g, n, s in rows]

    def counts(self, queue: str) -> tuple[int, int]:
        """(partitions, groups) of the queue."""
        rows = _rows(
            f"SELECT (SELECT COUNT(*) FROM {P} WHERE queue = %s), "
            f"(SELECT COUNT(DISTINCT consumer_group) FROM {C} WHERE queue = %s)",
            [queue, queue],
        )
        return int(rows[0][0]), int(rows[0][1])

    def all_counts(self) -> dict[str, tuple[int, int]]:
        """queue -> (partitions, groups), for every queue in two grouped reads."""
        parts: dict[str, int] = dict(_rows(f"SELECT queue, COUNT(*) FROM {P} GROUP BY queue", []))
        groups: dict[str, int] = dict(
            _rows(f"SELECT queue, COUNT(DISTINCT consumer_group) FROM {C} GROUP BY queue", [])
        )
        return {str(q): (int(parts.get(q, 0)), int(groups.get(q, 0))) for q in {*parts, *groups}}

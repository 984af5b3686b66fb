"""Offsets from 0 (issue 27): every stored offset moves down by one.

Until now a partition's first message had offset 1, an empty partition's
``next_offset`` was 1 and a cursor with nothing done stood at 0. Queen
numbers from 0, so the first message is offset 0, an empty partition's
last offset is -1 and "nothing done" is -1. Every offset column shifts by
exactly one, so every relation between them (pending, leased batch, what
a cursor has done) is the same after as before: a consumer reads on from
the same message, a leased batch is still acked by its lease, nothing is
delivered twice or skipped.

What moves: ``Partition.next_offset`` and ``log_start``, ``Message.offset``,
``ConsumerCursor.committed_offset``, ``start_offset``, ``batch_last`` and
the ``[first, last, attempts]`` runs of ``delivery_runs``,
``DeadLetter.offset`` (not the -1 of a message that never reached the log:
that stays the ``NEVER_LOGGED`` marker) and ``Trace.offset``. Queue samples
hold counts, not offsets, and stay.

Each table is one set-based UPDATE. On PostgreSQL the unique
``(partition, offset)`` constraint is checked row by row during an UPDATE,
so it is dropped for the shift and added back after (one index build); the
log tables are locked first (writes wait, reads go on) so no push or ack
lands between two of the statements. On SQLite the shift goes through
negative offsets in two UPDATEs (its unique index is part of the table),
and the few cursors with delivery runs are rewritten one by one.

The model defaults change with it (state only: Django keeps defaults in
Python, so no column changes).
"""

from typing import Any

from django.db import migrations, models

#: The tables a writer touches, queue rows first as every writer locks them.
_LOCKED = (
    "queenadmin_queue",
    "queenadmin_partition",
    "queenadmin_consumercursor",
    "queenadmin_message",
    "queenadmin_deadletter",
    "queenadmin_trace",
)

#: Each statement moves offsets by one, down (``op="-"``) or up (``op="+"``).
_MESSAGES = "UPDATE queenadmin_message SET msg_offset = msg_offset {op} 1"
_PARTITIONS = "UPDATE queenadmin_partition SET next_offset = next_offset {op} 1, log_start = log_start {op} 1"
_CURSORS = (
    "UPDATE queenadmin_consumercursor SET committed_offset = committed_offset {op} 1,"
    " start_offset = start_offset {op} 1, batch_last = batch_last {op} 1"
)
_TRACES = "UPDATE queenadmin_trace SET msg_offset = msg_offset {op} 1"
_PG_RUNS = """
UPDATE queenadmin_consumercursor SET delivery_runs = (
    SELECT jsonb_agg(jsonb_build_array((r.run->>0)::bigint {op} 1, (r.run->>1)::bigint {op} 1, r.run->2) ORDER BY r.n)
    FROM jsonb_array_elements(delivery_runs) WITH ORDINALITY AS r(run, n)
)
WHERE jsonb_typeof(delivery_runs) = 'array' AND jsonb_array_length(delivery_runs) > 0
"""
#: -1 marks a message that never reached the log (a timer out of attempts)
#: and stays: real offsets are 1 or more before the move down, 0 or more
#: before the move up.
_DEAD_LETTERS = {
    -1: "UPDATE queenadmin_deadletter SET msg_offset = msg_offset - 1 WHERE msg_offset > 0",
    1: "UPDATE queenadmin_deadletter SET msg_offset = msg_offset + 1 WHERE msg_offset >= 0",
}
#: SQLite's two steps through negative offsets, for the move down; the move
#: up takes them in the other order.
_SQLITE_MESSAGES = (
    "UPDATE queenadmin_message SET msg_offset = -msg_offset",
    "UPDATE queenadmin_message SET msg_offset = -msg_offset - 1",
)


def _shift_runs(runs: Any, by: int) -> list[list[int]]:
    return [[a + by, b + by, n] for a, b, n in runs]


def _sqlite_runs(apps: Any, by: int) -> None:
    cursors = apps.get_model("queenadmin", "ConsumerCursor")
    changed = []
    for cursor in cursors.objects.exclude(delivery_runs=[]).only("id", "delivery_runs").iterator(chunk_size=2000):
        if cursor.delivery_runs:
            cursor.delivery_runs = _shift_runs(cursor.delivery_runs, by)
            changed.append(cursor)
    cursors.objects.bulk_update(changed, ["delivery_runs"], batch_size=500)


def _move(apps: Any, schema_editor: Any, by: int) -> None:
    """Every stored offset moves ``by`` one, down (-1) or up (1)."""
    run = schema_editor.execute
    op = "-" if by < 0 else "+"
    if schema_editor.connection.vendor == "postgresql":
        run("LOCK TABLE " + ", ".join(_LOCKED) + " IN EXCLUSIVE MODE")
        run("ALTER TABLE queenadmin_message DROP CONSTRAINT message_partition_offset_uniq")
        run(_MESSAGES.format(op=op))
        run("ALTER TABLE queenadmin_message ADD CONSTRAINT message_partition_offset_uniq UNIQUE (partition_id, msg_offset)")
        run(_PG_RUNS.format(op=op))
    else:
        # Down: -offset is free (offsets were 1 or more), then -offset - 1 is
        # free. Up: -offset - 1 is free (offsets are 0 or more), then -offset.
        for sql in _SQLITE_MESSAGES if by < 0 else reversed(_SQLITE_MESSAGES):
            run(sql)
        _sqlite_runs(apps, by)
    run(_PARTITIONS.format(op=op))
    run(_CURSORS.format(op=op))
    run(_DEAD_LETTERS[by])
    run(_TRACES.format(op=op))


def renumber(apps: Any, schema_editor: Any) -> None:
    _move(apps, schema_editor, -1)


def renumber_back(apps: Any, schema_editor: Any) -> None:
    """The reverse: every offset up by one again (offsets from 1)."""
    _move(apps, schema_editor, 1)


def _default(model: str, name: str, value: int) -> migrations.AlterField:
    return migrations.AlterField(model_name=model, name=name, field=models.BigIntegerField(default=value))


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0018_ephemeral")]

    operations: list = [
        migrations.RunPython(renumber, renumber_back, elidable=False),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                _default("partition", "next_offset", 0),
                _default("partition", "log_start", 0),
                _default("consumercursor", "committed_offset", -1),
                _default("consumercursor", "start_offset", -1),
                _default("consumercursor", "batch_last", -1),
            ]
        ),
    ]

"""PostgreSQL: the ``queenadmin_push_one`` function, a lone push of one
message in one autocommit statement (``PostgresStore.push_one_committed``).

The function's text is a frozen copy of ``PUSH_ONE_FUNCTION`` in
``domain/queues/store/postgres.py`` as of this migration: a migration must
not import code that changes after it. Nothing on SQLite.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

PUSH_ONE = """
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
    PERFORM pg_notify('queenadmin_queues', queue_name);
    verdict := 'queued';
    found_offset := nxt;
END
$$
"""
DROP_PUSH_ONE = (
    "DROP FUNCTION IF EXISTS queenadmin_push_one(text, text, text, boolean, text, text, text, text, timestamptz)"
)


def create_function(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PUSH_ONE)


def drop_function(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_PUSH_ONE)


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0030_kv_namespace_counts"),
    ]

    operations = [
        migrations.RunPython(create_function, drop_function),
    ]

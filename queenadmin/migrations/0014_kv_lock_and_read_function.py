from __future__ import annotations

from django.db import migrations

# PostgreSQL: a KV call inside a transaction locks its keys and reads their
# rows in one call of this function (``PostgresStore.lock_and_read``). As a
# plain statement it had to be planned on every call (~240 us of PostgreSQL
# CPU in a guarded transaction of ~800): a cached generic plan made while
# the table was small is a sequential scan, and stays one while the table
# grows (measured at 12 ms per 100-key read). Inside this function the plan
# is cached per connection and made with sequential scans off, so it is
# always the unique index on (namespace, key), at any table size.
#
# The locks come first, in one order for every writer (the keys' hashes,
# sorted); the read is a statement of its own after them, so in READ
# COMMITTED it sees every row committed while it waited (a volatile
# function takes a new snapshot per statement), and its row locks add
# nothing to the advisory locks every writer of these keys takes first.
CREATE = """
CREATE OR REPLACE FUNCTION queenadmin_kv_lock_and_read(
    lock_class integer, lock_names text[], namespaces text[], keys text[]
) RETURNS SETOF queenadmin_kventry
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
AS $$
BEGIN
    PERFORM count(pg_advisory_xact_lock(lock_class, s.h))
    FROM (SELECT DISTINCT hashtext(n) AS h FROM unnest(lock_names) AS n ORDER BY 1) AS s;
    RETURN QUERY
    SELECT t.* FROM queenadmin_kventry AS t
    JOIN unnest(namespaces, keys) AS w(ns, k) ON t.namespace = w.ns AND t.key = w.k
    FOR NO KEY UPDATE OF t;
END
$$
"""

DROP = "DROP FUNCTION IF EXISTS queenadmin_kv_lock_and_read(integer, text[], text[], text[])"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP)


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0013_token_scopes")]
    operations = [migrations.RunPython(forwards, backwards)]

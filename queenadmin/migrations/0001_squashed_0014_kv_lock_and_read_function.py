"""queenadmin's schema, squashed from migrations 0001 to 0014 (2026-12-03).

A database any earlier queenadmin migrated to the end (0014) counts this one
as applied (``replaces``) and carries on; a new database gets the whole
schema in one step. A database left part of the way (some of 0001-0014
applied, not all) cannot upgrade from here: migrate it to 0014 with
queenadmin at commit f781ecd first. ``queenadmin.upgrade`` refuses to
migrate it and says so: left alone, Django would drop these migrations from
its plan and report nothing to do, on a schema the code no longer fits.

Beyond the models' tables this makes what the models do not describe:
- PostgreSQL: the KV version sequence (CACHE 1: values rise in real time
  across sessions; a cache would hand out blocks and break fencing) and the
  ``queenadmin_kv_lock_and_read`` function (was 0002 and 0014);
  SQLite: the one version counter row.
- The two operator groups and their permissions (was 0006).

The data steps of 0004 (cursor delivery runs) and 0013 (old tokens become
``admin``) only changed rows a database had before them; a new database has
none, so they are not here.
"""

from __future__ import annotations

from typing import Any

import django.db.models.deletion
from django.db import migrations, models

import queenadmin.models.fields

#: Models a viewer may look at; operators may look at all of them.
VIEWER_MODELS = (
    "kventry",
    "timer",
    "queue",
    "partition",
    "message",
    "consumergroup",
    "consumercursor",
    "deadletter",
    "auditentry",
)
#: What an operator may change beyond viewing (dashboard actions check these).
OPERATOR_PERMS = (
    "change_kventry",
    "delete_kventry",
    "change_timer",
    "delete_timer",
    "change_queue",
    "change_deadletter",
    "delete_deadletter",
    "view_apitoken",
    "add_apitoken",
    "change_apitoken",
)
GROUPS = ("queenadmin viewers", "queenadmin operators")

SEQUENCE = "CREATE SEQUENCE IF NOT EXISTS queenadmin_kv_version CACHE 1"
DROP_SEQUENCE = "DROP SEQUENCE IF EXISTS queenadmin_kv_version"

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
LOCK_AND_READ = """
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
DROP_LOCK_AND_READ = "DROP FUNCTION IF EXISTS queenadmin_kv_lock_and_read(integer, text[], text[], text[])"


def versions_and_functions(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(SEQUENCE)
        schema_editor.execute(LOCK_AND_READ)
    else:
        apps.get_model("queenadmin", "VersionCounter").objects.get_or_create(id=1, defaults={"value": 0})


def drop_versions_and_functions(apps: Any, schema_editor: Any) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP_LOCK_AND_READ)
        schema_editor.execute(DROP_SEQUENCE)


def make_groups(apps: Any, schema_editor: Any) -> None:
    # Permissions are created after migrate; make them now so the groups can hold them.
    from django.contrib.auth.management import create_permissions

    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    mine = Permission.objects.filter(content_type__app_label="queenadmin")
    viewing = list(mine.filter(codename__in=[f"view_{m}" for m in VIEWER_MODELS]))
    viewers, _ = Group.objects.get_or_create(name=GROUPS[0])
    viewers.permissions.add(*viewing)
    operators, _ = Group.objects.get_or_create(name=GROUPS[1])
    operators.permissions.add(*viewing, *mine.filter(codename__in=OPERATOR_PERMS))


def drop_groups(apps: Any, schema_editor: Any) -> None:
    apps.get_model("auth", "Group").objects.filter(name__in=GROUPS).delete()


#: The migrations this one replaces, in order (``queenadmin.upgrade`` reads it).
REPLACED = [
    ("queenadmin", "0001_initial"),
    ("queenadmin", "0002_version_counter"),
    ("queenadmin", "0003_queues"),
    ("queenadmin", "0004_cursor_delivery_runs"),
    ("queenadmin", "0005_timers"),
    ("queenadmin", "0006_operator_groups"),
    ("queenadmin", "0007_retention"),
    ("queenadmin", "0009_queue_samples"),
    ("queenadmin", "0011_dash2"),
    ("queenadmin", "0012_traces"),
    ("queenadmin", "0013_token_scopes"),
    ("queenadmin", "0014_kv_lock_and_read_function"),
]


class Migration(migrations.Migration):
    initial = True
    replaces = REPLACED

    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.CreateModel(
            name="ApiToken",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=100, unique=True)),
                ("token_hash", models.CharField(max_length=64, unique=True)),
                ("prefix", models.CharField(max_length=12)),
                (
                    "scope",
                    models.CharField(
                        choices=[("read", "Read"), ("write", "Write"), ("admin", "Admin")],
                        default="write",
                        max_length=8,
                    ),
                ),
                ("created_at", models.DateTimeField()),
                ("revoked_at", models.DateTimeField(blank=True, null=True)),
            ],
            options={
                "verbose_name": "API token",
            },
        ),
        migrations.CreateModel(
            name="VersionCounter",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ("value", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="AuditEntry",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("at", models.DateTimeField()),
                ("actor", models.CharField(max_length=150)),
                ("action", models.CharField(max_length=64)),
                ("target", models.TextField()),
                ("before", models.TextField(blank=True, default="")),
                ("after", models.TextField(blank=True, default="")),
                ("reason", models.TextField(blank=True, default="")),
                ("kind", models.CharField(blank=True, default="", max_length=16)),
                ("via", models.CharField(blank=True, default="", max_length=16)),
            ],
            options={
                "verbose_name_plural": "audit entries",
                "ordering": ["-at", "-id"],
                "indexes": [
                    models.Index(fields=["-at", "-id"], name="audit_at_idx"),
                    models.Index(fields=["kind", "-at"], name="audit_kind_at_idx"),
                ],
            },
        ),
        migrations.CreateModel(
            name="KVEntry",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("namespace", queenadmin.models.fields.ByteOrderTextField()),
                ("key", queenadmin.models.fields.ByteOrderTextField()),
                ("value_json", models.TextField()),
                ("version", models.BigIntegerField()),
                ("expires_at", models.DateTimeField(blank=True, null=True)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "verbose_name": "KV entry",
                "verbose_name_plural": "KV entries",
                "indexes": [models.Index(fields=["expires_at"], name="kventry_expires_idx")],
                "constraints": [models.UniqueConstraint(fields=("namespace", "key"), name="kventry_ns_key_uniq")],
            },
        ),
        migrations.CreateModel(
            name="Queue",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", queenadmin.models.fields.ByteOrderTextField(unique=True)),
                ("namespace", models.TextField(blank=True, null=True)),
                ("task", models.TextField(blank=True, null=True)),
                ("options", models.JSONField(default=dict)),
                ("created_at", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["namespace", "task"], name="queue_ns_task_idx")],
            },
        ),
        migrations.CreateModel(
            name="Partition",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", queenadmin.models.fields.ByteOrderTextField()),
                ("next_offset", models.BigIntegerField(default=1)),
                ("log_start", models.BigIntegerField(default=1)),
                ("retained_bytes", models.BigIntegerField(default=0)),
                ("created_at", models.DateTimeField()),
                ("last_push_at", models.DateTimeField(blank=True, null=True)),
                (
                    "queue",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="partitions", to="queenadmin.queue"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="DeadLetter",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("group", models.TextField(db_column="group_name")),
                ("offset", models.BigIntegerField(db_column="msg_offset")),
                ("transaction_id", models.TextField()),
                ("message_id", models.CharField(max_length=36)),
                ("payload", models.TextField()),
                ("error", models.TextField(blank=True, null=True)),
                ("retry_count", models.IntegerField(default=0)),
                ("created_at", models.DateTimeField()),
                ("failed_at", models.DateTimeField()),
                (
                    "partition",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="dead_letters",
                        to="queenadmin.partition",
                    ),
                ),
                (
                    "queue",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="dead_letters", to="queenadmin.queue"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="ConsumerGroup",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.TextField()),
                ("subscription_mode", models.CharField(max_length=8)),
                ("created_at", models.DateTimeField()),
                (
                    "queue",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="groups", to="queenadmin.queue"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="QueueSample",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("queue_id", models.BigIntegerField()),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("resolution", models.IntegerField()),
                ("at", models.DateTimeField()),
                ("pushed_total", models.BigIntegerField()),
                ("popped_total", models.BigIntegerField()),
                ("acked_total", models.BigIntegerField()),
                ("failed_total", models.BigIntegerField()),
                ("dlq_total", models.BigIntegerField()),
                ("pushed", models.BigIntegerField()),
                ("popped", models.BigIntegerField()),
                ("acked", models.BigIntegerField()),
                ("failed", models.BigIntegerField()),
                ("dlq", models.BigIntegerField()),
                ("depth", models.BigIntegerField()),
                ("oldest_claimable_age", models.FloatField()),
            ],
            options={
                "indexes": [models.Index(fields=["resolution", "at"], name="queuesample_res_at_idx")],
                "constraints": [
                    models.UniqueConstraint(fields=("queue", "resolution", "at"), name="queuesample_queue_res_at_uniq")
                ],
            },
        ),
        migrations.CreateModel(
            name="Timer",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("timer_key", queenadmin.models.fields.ByteOrderTextField()),
                ("partition", models.TextField(default="Default")),
                ("deliver_at", models.DateTimeField()),
                ("fire_at", models.DateTimeField()),
                ("txn", models.TextField()),
                ("message_id", models.CharField(max_length=36)),
                ("payload", models.BinaryField()),
                ("payload_json", models.TextField()),
                ("encrypted", models.BooleanField(default=False)),
                ("producer_sub", models.TextField(blank=True, null=True)),
                ("attempts", models.IntegerField(default=0)),
                ("last_error", models.TextField(blank=True, null=True)),
                ("created_at", models.DateTimeField()),
                ("updated_at", models.DateTimeField()),
            ],
            options={
                "indexes": [
                    models.Index(fields=["fire_at", "id"], name="timer_fire_idx"),
                    models.Index(fields=["deliver_at", "id"], name="timer_deliver_idx"),
                ],
                "constraints": [models.UniqueConstraint(fields=("queue", "timer_key"), name="timer_queue_key_uniq")],
            },
        ),
        migrations.CreateModel(
            name="Trace",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("trace_id", models.CharField(max_length=36, unique=True)),
                ("transaction_id", models.TextField()),
                ("offset", models.BigIntegerField(db_column="msg_offset")),
                ("group", models.TextField(db_column="group_name")),
                ("event_type", models.TextField()),
                ("data", models.TextField()),
                ("worker_id", models.TextField(blank=True, null=True)),
                ("created_at", models.DateTimeField()),
                (
                    "partition",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="traces", to="queenadmin.partition"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="TraceName",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.TextField()),
                ("created_at", models.DateTimeField()),
                (
                    "trace",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="names", to="queenadmin.trace"
                    ),
                ),
            ],
        ),
        migrations.CreateModel(
            name="TraceNameSummary",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.TextField(unique=True)),
                ("traces", models.BigIntegerField(default=0)),
                ("messages", models.BigIntegerField(default=0)),
                ("last_seen", models.DateTimeField()),
            ],
            options={
                "indexes": [models.Index(fields=["-last_seen", "name"], name="tracenamesummary_seen_idx")],
            },
        ),
        migrations.CreateModel(
            name="Message",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("offset", models.BigIntegerField(db_column="msg_offset")),
                ("transaction_id", models.TextField()),
                ("message_id", models.CharField(max_length=36)),
                ("payload", models.TextField()),
                ("trace_id", models.CharField(blank=True, max_length=36, null=True)),
                ("created_at", models.DateTimeField()),
                (
                    "partition",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="queenadmin.partition"
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(fields=["partition", "transaction_id"], name="message_partition_txn_idx"),
                    models.Index(fields=["message_id"], name="message_id_idx"),
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("partition", "offset"), name="message_partition_offset_uniq")
                ],
            },
        ),
        migrations.CreateModel(
            name="ConsumerCursor",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("group", models.TextField(db_column="group_name")),
                ("committed_offset", models.BigIntegerField(default=0)),
                ("start_offset", models.BigIntegerField(default=0)),
                ("lease_id", models.CharField(blank=True, max_length=36, null=True)),
                ("leased_until", models.DateTimeField(blank=True, null=True)),
                ("batch_last", models.BigIntegerField(default=0)),
                ("delivery_runs", models.JSONField(default=list)),
                ("retry_count", models.IntegerField(default=0)),
                ("dead_lettered", models.BigIntegerField(default=0)),
                ("delivered", models.BigIntegerField(default=0)),
                ("acked", models.BigIntegerField(default=0)),
                ("failed", models.BigIntegerField(default=0)),
                ("last_claim_at", models.DateTimeField(blank=True, null=True)),
                (
                    "partition",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="cursors", to="queenadmin.partition"
                    ),
                ),
            ],
            options={
                "indexes": [models.Index(fields=["lease_id"], name="cursor_lease_idx")],
                "constraints": [
                    models.UniqueConstraint(fields=("partition", "group"), name="cursor_partition_group_uniq")
                ],
            },
        ),
        migrations.AddConstraint(
            model_name="partition",
            constraint=models.UniqueConstraint(fields=("queue", "name"), name="partition_queue_name_uniq"),
        ),
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(fields=["queue", "failed_at"], name="deadletter_queue_idx"),
        ),
        migrations.AddIndex(
            model_name="deadletter",
            index=models.Index(fields=["queue", "id"], name="deadletter_queue_id_idx"),
        ),
        migrations.AddConstraint(
            model_name="consumergroup",
            constraint=models.UniqueConstraint(fields=("queue", "name"), name="consumergroup_queue_name_uniq"),
        ),
        migrations.AddIndex(
            model_name="trace",
            index=models.Index(fields=["partition", "transaction_id", "id"], name="trace_message_idx"),
        ),
        migrations.AddIndex(
            model_name="tracename",
            index=models.Index(fields=["name", "created_at", "trace"], name="tracename_name_idx"),
        ),
        migrations.AddConstraint(
            model_name="tracename",
            constraint=models.UniqueConstraint(fields=("trace", "name"), name="tracename_trace_name_uniq"),
        ),
        migrations.RunPython(versions_and_functions, drop_versions_and_functions),
        migrations.RunPython(make_groups, drop_groups),
    ]

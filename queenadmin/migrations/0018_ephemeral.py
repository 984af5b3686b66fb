"""Ephemeral queues (issue 27): the declared config (logged) and the contents.

On PostgreSQL the content tables are UNLOGGED: no WAL, and emptied by
PostgreSQL after a crash, which is the class's contract (contents survive
nothing). A declared queue's config stays in a logged table. No foreign
keys between them (a logged table may not reference an unlogged one).
"""

import queenadmin.models.fields
from django.db import migrations, models

#: The tables whose rows are contents, not configuration.
CONTENT_TABLES = (
    "queenadmin_ephemeralqueue",
    "queenadmin_ephemeralmessage",
    "queenadmin_ephemeralpartition",
    "queenadmin_ephemeralcursor",
    "queenadmin_ephemerallease",
)


def make_unlogged(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in CONTENT_TABLES:
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} SET UNLOGGED")


def make_logged(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in CONTENT_TABLES:
        schema_editor.execute(f"ALTER TABLE {schema_editor.quote_name(table)} SET LOGGED")


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0017_streams")]

    operations = [
        migrations.CreateModel(
            name="EphemeralConfig",
            fields=[
                ("queue", queenadmin.models.fields.ByteOrderTextField(primary_key=True, serialize=False)),
                ("options_json", models.TextField()),
                ("updated_at_ms", models.BigIntegerField()),
            ],
        ),
        migrations.CreateModel(
            name="EphemeralCursor",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "queue",
                        "consumer_group",
                        "partition",
                        blank=True,
                        editable=False,
                        primary_key=True,
                        serialize=False,
                    ),
                ),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("consumer_group", queenadmin.models.fields.ByteOrderTextField()),
                ("partition", queenadmin.models.fields.ByteOrderTextField()),
                ("delivered_seq", models.BigIntegerField(default=0)),
                ("skipped", models.BigIntegerField(default=0)),
            ],
        ),
        migrations.CreateModel(
            name="EphemeralPartition",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "queue", "partition", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("partition", queenadmin.models.fields.ByteOrderTextField()),
            ],
        ),
        migrations.CreateModel(
            name="EphemeralQueue",
            fields=[
                ("queue", queenadmin.models.fields.ByteOrderTextField(primary_key=True, serialize=False)),
                ("epoch", models.BigIntegerField()),
                ("options_json", models.TextField(default="")),
                ("last_seq", models.BigIntegerField(default=0)),
                ("depth", models.BigIntegerField(default=0)),
                ("bytes", models.BigIntegerField(default=0)),
                ("drops_bounds", models.BigIntegerField(default=0)),
                ("drops_ttl", models.BigIntegerField(default=0)),
                ("drops_retry", models.BigIntegerField(default=0)),
                ("touched_at_ms", models.BigIntegerField()),
            ],
        ),
        migrations.CreateModel(
            name="EphemeralLease",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "queue", "seq", "consumer_group", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("consumer_group", queenadmin.models.fields.ByteOrderTextField()),
                ("seq", models.BigIntegerField()),
                ("partition", queenadmin.models.fields.ByteOrderTextField()),
                ("attempts", models.IntegerField()),
                ("expires_at_ms", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["queue", "consumer_group", "expires_at_ms"], name="ephlease_due_idx")],
            },
        ),
        migrations.CreateModel(
            name="EphemeralMessage",
            fields=[
                (
                    "pk",
                    models.CompositePrimaryKey(
                        "queue", "seq", blank=True, editable=False, primary_key=True, serialize=False
                    ),
                ),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("seq", models.BigIntegerField()),
                ("partition", queenadmin.models.fields.ByteOrderTextField()),
                ("payload", models.TextField()),
                ("size", models.IntegerField()),
                ("created_at_ms", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["queue", "partition", "seq"], name="ephmsg_partition_seq_idx")],
            },
        ),
        migrations.RunPython(make_unlogged, make_logged),
    ]

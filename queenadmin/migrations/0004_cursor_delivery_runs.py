"""Exact delivery counts: ``ConsumerCursor.delivery_runs`` replaces the
``head_attempts`` and ``delivered_offset`` pair.

The old pair only knew one count for everything delivered above the
cursor, so existing cursors get that count as a single run (at least 1:
an auto-acked claim reset it to 0 while later offsets had gone out).
"""

from __future__ import annotations

from typing import Any

from django.db import migrations, models
from django.db.models import F


def forwards(apps: Any, schema_editor: Any) -> None:
    cursors = apps.get_model("queenadmin", "ConsumerCursor").objects.using(schema_editor.connection.alias)
    changed = []
    for cursor in cursors.filter(delivered_offset__gt=F("committed_offset")).iterator():
        cursor.delivery_runs = [[cursor.committed_offset + 1, cursor.delivered_offset, max(cursor.head_attempts, 1)]]
        changed.append(cursor)
    cursors.bulk_update(changed, ["delivery_runs"], batch_size=500)


def backwards(apps: Any, schema_editor: Any) -> None:
    cursors = apps.get_model("queenadmin", "ConsumerCursor").objects.using(schema_editor.connection.alias)
    # Write each row once: a second write to a row this transaction already
    # changed queues a foreign-key trigger event on PostgreSQL, and the
    # column drop that follows then fails with "pending trigger events".
    cursors.filter(delivery_runs=[]).update(delivered_offset=F("committed_offset"))
    changed = []
    for cursor in cursors.exclude(delivery_runs=[]).iterator():
        runs = cursor.delivery_runs
        cursor.head_attempts = runs[0][2]
        cursor.delivered_offset = max(cursor.committed_offset, runs[-1][1])
        changed.append(cursor)
    cursors.bulk_update(changed, ["head_attempts", "delivered_offset"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0003_queues"),
    ]

    operations = [
        migrations.AddField(
            model_name="consumercursor",
            name="delivery_runs",
            field=models.JSONField(default=list),
        ),
        migrations.RunPython(forwards, backwards, elidable=True),
        migrations.RemoveField(
            model_name="consumercursor",
            name="delivered_offset",
        ),
        migrations.RemoveField(
            model_name="consumercursor",
            name="head_attempts",
        ),
    ]

"""Issue 39 items 4 and 5: each consumer group's counters per sampler tick
(``GroupSample``, for its rates), every queue's samples summed per tick
(``QueueSampleTotal``, for the overview's chart of all queues: filled here
from the samples kept) and the thresholds of the overview's "needs
attention" list (``AttentionThreshold``)."""

from django.db import migrations, models

import queenadmin.models.fields


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0025_queue_pause"),
    ]

    operations = [
        migrations.CreateModel(
            name="QueueSampleTotal",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("resolution", models.IntegerField()),
                ("at", models.DateTimeField()),
                ("pushed", models.BigIntegerField()),
                ("popped", models.BigIntegerField()),
                ("acked", models.BigIntegerField()),
                ("failed", models.BigIntegerField()),
                ("dlq", models.BigIntegerField()),
                ("depth", models.BigIntegerField()),
                ("oldest_claimable_age", models.FloatField()),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("resolution", "at"), name="queuesampletotal_res_at_uniq")
                ],
            },
        ),
        migrations.RunSQL(
            "INSERT INTO queenadmin_queuesampletotal (resolution, at, pushed, popped, acked, failed, dlq, depth,"
            " oldest_claimable_age) SELECT resolution, at, SUM(pushed), SUM(popped), SUM(acked), SUM(failed),"
            " SUM(dlq), SUM(depth), MAX(oldest_claimable_age) FROM queenadmin_queuesample GROUP BY resolution, at",
            migrations.RunSQL.noop,
        ),
        migrations.CreateModel(
            name="AttentionThreshold",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("queue", queenadmin.models.fields.ByteOrderTextField(unique=True)),
                ("max_lag", models.BigIntegerField(blank=True, null=True)),
                ("max_age_seconds", models.IntegerField(blank=True, null=True)),
                ("dlq_growth", models.IntegerField(blank=True, null=True)),
                ("window_minutes", models.IntegerField(blank=True, null=True)),
                ("updated_at", models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name="GroupSample",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("queue_id", models.BigIntegerField()),
                ("queue", queenadmin.models.fields.ByteOrderTextField()),
                ("group", models.TextField(db_column="group_name")),
                ("at", models.DateTimeField()),
                ("popped_total", models.BigIntegerField()),
                ("acked_total", models.BigIntegerField()),
                ("failed_total", models.BigIntegerField()),
                ("dlq_total", models.BigIntegerField()),
                ("popped", models.BigIntegerField()),
                ("acked", models.BigIntegerField()),
                ("failed", models.BigIntegerField()),
                ("dlq", models.BigIntegerField()),
                ("lag", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["at"], name="groupsample_at_idx")],
                "constraints": [
                    models.UniqueConstraint(fields=("queue", "group", "at"), name="groupsample_queue_group_at_uniq")
                ],
            },
        ),
    ]

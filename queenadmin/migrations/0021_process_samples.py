"""Issue 27: each serving process samples itself (``ProcessSample``) for
``/api/v1/analytics/system-metrics``."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0020_conflation_priority"),
    ]

    operations = [
        migrations.CreateModel(
            name="ProcessSample",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("host", models.CharField(max_length=255)),
                ("port", models.IntegerField()),
                ("pid", models.IntegerField()),
                ("at", models.DateTimeField()),
                ("cpu_user_seconds", models.FloatField()),
                ("cpu_system_seconds", models.FloatField()),
                ("rss_bytes", models.BigIntegerField(null=True)),
                ("virtual_bytes", models.BigIntegerField(null=True)),
                ("threads", models.IntegerField()),
                ("push_requests", models.BigIntegerField()),
                ("pop_requests", models.BigIntegerField()),
                ("ack_requests", models.BigIntegerField()),
                ("requests", models.BigIntegerField()),
            ],
            options={
                "indexes": [models.Index(fields=["at"], name="processsample_at_idx")],
            },
        ),
    ]

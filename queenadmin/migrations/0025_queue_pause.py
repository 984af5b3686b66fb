"""Issue 39: pause and resume a queue, or one consumer group's pops of it
(``domain/queues/operator/pause.py``)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0024_producer_sub"),
    ]

    operations = [
        migrations.AddField(
            model_name="queue",
            name="paused",
            field=models.BooleanField(default=False),
        ),
        migrations.AddField(
            model_name="queue",
            name="paused_groups",
            field=models.JSONField(default=list),
        ),
    ]

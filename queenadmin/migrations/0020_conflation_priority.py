"""Issue 27: a consumer group's conflation policy (queue priority lives in
``Queue.options`` and needs no column)."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0019_offsets_from_zero")]

    operations = [
        migrations.AddField(
            model_name="consumergroup",
            name="conflation",
            field=models.BooleanField(default=False),
        ),
    ]

from __future__ import annotations

from django.db import migrations, models

# Tokens made before scopes could do everything, deletes included: they
# become ``admin`` so no client that worked yesterday is refused today. The
# second operation only moves the default for tokens made from now on.
SCOPE_CHOICES = [("read", "Read"), ("write", "Write"), ("admin", "Admin")]


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0012_traces"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=SCOPE_CHOICES, default="admin", max_length=8),
        ),
        migrations.AlterField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(choices=SCOPE_CHOICES, default="write", max_length=8),
        ),
    ]

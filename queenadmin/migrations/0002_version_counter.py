from __future__ import annotations

from django.db import migrations


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        # CACHE 1 (the default) keeps values monotonic in real time across
        # sessions; a larger cache hands out blocks and breaks fencing.
        schema_editor.execute("CREATE SEQUENCE IF NOT EXISTS queenadmin_kv_version CACHE 1")
    else:
        apps.get_model("queenadmin", "VersionCounter").objects.get_or_create(id=1, defaults={"value": 0})


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute("DROP SEQUENCE IF EXISTS queenadmin_kv_version")


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0001_initial")]
    operations = [migrations.RunPython(forwards, backwards)]

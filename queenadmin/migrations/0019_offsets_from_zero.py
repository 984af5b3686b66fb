"""Reserved for issue 27 (offsets from 0); filled in by the change that builds it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0018_ephemeral")]

    operations: list = []

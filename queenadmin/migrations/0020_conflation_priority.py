"""Reserved for issue 27 (conflation and priority); filled in by the change that builds it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0019_offsets_from_zero")]

    operations: list = []

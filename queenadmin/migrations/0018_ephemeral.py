"""Reserved for issue 27 (ephemeral queues); filled in by the change that builds it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("queenadmin", "0017_streams")]

    operations: list = []

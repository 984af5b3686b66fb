"""Drop the message table's index on ``partition_id`` alone.

The unique (partition_id, msg_offset) index leads with the same column, so
it answers every lookup by partition; the second index only cost each
pushed message one more index entry. The index has the same name on both
databases; dropping it by name spares SQLite a rebuild of the table (what
``AlterField`` does there).
"""

import django.db.models.deletion
from django.db import migrations, models

INDEX = "queenadmin_message_partition_id_bc196008"


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0022_apitoken_created_by"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="partition",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="messages",
                        to="queenadmin.partition",
                    ),
                ),
            ],
            database_operations=[
                migrations.RunSQL(
                    f"DROP INDEX IF EXISTS {INDEX}",
                    reverse_sql=f"CREATE INDEX IF NOT EXISTS {INDEX} ON queenadmin_message (partition_id)",
                ),
            ],
        ),
    ]

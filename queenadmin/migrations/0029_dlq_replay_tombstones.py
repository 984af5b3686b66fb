"""Issue 39: where a replayed dead letter went (``operator/replays.py``)."""

import queenadmin.models.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queenadmin', '0028_kv_history'),
    ]

    operations = [
        migrations.CreateModel(
            name='DeadLetterReplay',
            fields=[
                ('dead_letter_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('source_queue', queenadmin.models.fields.ByteOrderTextField()),
                ('group', models.TextField(db_column='group_name')),
                ('original_transaction_id', models.TextField()),
                ('queue', queenadmin.models.fields.ByteOrderTextField()),
                ('partition', queenadmin.models.fields.ByteOrderTextField()),
                ('message_id', models.CharField(max_length=36)),
                ('offset', models.BigIntegerField(db_column='msg_offset')),
                ('replayed_at', models.DateTimeField()),
                ('actor', models.TextField()),
                ('via', models.CharField(max_length=16)),
            ],
            options={
                'indexes': [models.Index(fields=['replayed_at'], name='dlqreplay_replayed_at_idx')],
            },
        ),
    ]

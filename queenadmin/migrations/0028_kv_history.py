"""Issue 41: every version of a key (``domain/kv/history.py``)."""

import queenadmin.models.fields
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('queenadmin', '0027_write_only_tokens'),
    ]

    operations = [
        migrations.CreateModel(
            name='KVVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('namespace', queenadmin.models.fields.ByteOrderTextField()),
                ('key', queenadmin.models.fields.ByteOrderTextField()),
                ('version', models.BigIntegerField()),
                ('op', models.CharField(max_length=8)),
                ('value_json', models.TextField(blank=True, null=True)),
                ('digest', models.CharField(blank=True, max_length=64, null=True)),
                ('size', models.IntegerField(default=0)),
                ('at', models.DateTimeField()),
                ('expires_at', models.DateTimeField(blank=True, null=True)),
                ('actor', models.TextField(blank=True, null=True)),
            ],
            options={
                'verbose_name': 'KV version',
                'constraints': [models.UniqueConstraint(models.F('namespace'), models.F('key'), models.OrderBy(models.F('version'), descending=True), name='kvversion_ns_key_version_uniq')],
            },
        ),
    ]

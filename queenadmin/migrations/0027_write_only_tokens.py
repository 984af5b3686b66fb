"""Issue 40: Queen's write-only level as an API token's scope
(``models.auth.WRITE_ONLY_SCOPE``): a tenth character and a fourth choice."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("queenadmin", "0026_attention_thresholds"),
    ]

    operations = [
        migrations.AlterField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(
                choices=[("read", "Read"), ("write-only", "Write-only"), ("write", "Write"), ("admin", "Admin")],
                default="write",
                max_length=10,
            ),
        ),
    ]

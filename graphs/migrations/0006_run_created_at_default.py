import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0005_execution_run_node_index"),
    ]

    # The default is applied by Django, not the database, so the schema does not change:
    # state only, or SQLite would copy the whole runs table to alter nothing.
    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AlterField(
                    model_name="run",
                    name="created_at",
                    field=models.DateTimeField(default=django.utils.timezone.now, editable=False),
                ),
            ],
        ),
    ]

from django.db import migrations, models
from django.db.models import F


def published_when_saved(apps, schema_editor):
    """Until drafts, every version was published as it was saved."""
    WorkflowVersion = apps.get_model("graphs", "WorkflowVersion")
    WorkflowVersion.objects.update(published_at=F("created_at"))


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0007_workflowgroup_slug"),
    ]

    operations = [
        migrations.AddField(
            model_name="workflowversion",
            name="published_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunPython(published_when_saved, migrations.RunPython.noop),
    ]

from django.db import migrations, models

from graphs.authoring.slugs import slug_for


def choose_slugs(apps, schema_editor):
    """Every existing group gets the slug a new group of its name would get."""
    WorkflowGroup = apps.get_model("graphs", "WorkflowGroup")
    taken: set[str] = set()
    for group in WorkflowGroup.objects.order_by("pk"):
        group.slug = slug_for(group.name, taken.__contains__)
        taken.add(group.slug)
        group.save(update_fields=["slug"])


class Migration(migrations.Migration):
    dependencies = [
        ("graphs", "0006_run_created_at_default"),
    ]

    # Added blank, filled, then made unique: existing rows have no slug yet.
    operations = [
        migrations.AddField(
            model_name="workflowgroup",
            name="slug",
            # No index yet: a SlugField's default one would clash, on PostgreSQL, with the
            # `_like` index that making it unique below creates.
            field=models.SlugField(max_length=60, default="", editable=False, db_index=False),
            preserve_default=False,
        ),
        migrations.RunPython(choose_slugs, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="workflowgroup",
            name="slug",
            field=models.SlugField(
                editable=False,
                help_text="The group's MCP endpoint is /mcp/<slug>.",
                max_length=60,
                unique=True,
            ),
        ),
    ]

# The traceparent a run was started under (issue 18): the reaper's re-send of a queued run,
# and the retry of a run whose worker was lost, continue the run's trace instead of starting
# a new one.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graphs', '0010_run_trace_id'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='trace_parent',
            field=models.CharField(blank=True, max_length=55),
        ),
    ]

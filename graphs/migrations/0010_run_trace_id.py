# The OpenTelemetry trace id of a run (issue 18): shown on the run page, linked to the
# operator's trace viewer through TRACE_URL_TEMPLATE.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('graphs', '0009_run_is_test_mocks'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='trace_id',
            field=models.CharField(blank=True, max_length=32),
        ),
    ]

from django.db import migrations, models
from django.db.models import Count, OuterRef, Subquery
from django.db.models.functions import Coalesce


def backfill(apps, schema_editor):
    """Count each run's cancelled trials (current attempts) into its new counter."""
    Run = apps.get_model("evals", "Run")
    Trial = apps.get_model("evals", "Trial")
    cancelled = (
        Trial.objects.filter(run=OuterRef("pk"), replaced_by__isnull=True, status="cancelled")
        .order_by()
        .values("run")
        .annotate(n=Count("id"))
        .values("n")
    )
    with_cancelled = Trial.objects.filter(status="cancelled").values("run_id")
    Run.objects.filter(id__in=with_cancelled).update(
        trials_cancelled=Coalesce(Subquery(cancelled), 0)
    )


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0018_trial_run_readable_with_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="trials_cancelled",
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]

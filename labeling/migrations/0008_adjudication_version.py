"""Adjudications carry a per-trial ``version`` (1, 2, ...), so a decision form can say which
decision it was shown and a stale one is refused; existing rows are numbered oldest first."""

from django.conf import settings
from django.db import migrations, models


def number_existing(apps, schema_editor):
    Adjudication = apps.get_model("labeling", "Adjudication")
    last_trial, version = None, 0
    for adj in Adjudication.objects.order_by("trial_id", "created_at", "id").iterator():
        version = version + 1 if adj.trial_id == last_trial else 1
        last_trial = adj.trial_id
        if adj.version != version:
            Adjudication.objects.filter(pk=adj.pk).update(version=version)


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0019_run_trials_cancelled"),
        ("labeling", "0007_label_revision_history_outlives_undo"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterModelOptions(
            name="adjudication",
            options={"ordering": ["trial_id", "-version"]},
        ),
        migrations.AddField(
            model_name="adjudication",
            name="version",
            field=models.PositiveIntegerField(
                default=1, help_text="1 for a trial's first decision; each change adds one."
            ),
        ),
        migrations.RunPython(number_existing, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="adjudication",
            constraint=models.UniqueConstraint(
                fields=("trial", "version"), name="adjudication_one_per_version"
            ),
        ),
    ]

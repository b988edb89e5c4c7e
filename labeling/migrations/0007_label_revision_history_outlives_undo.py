"""Label revisions are keyed by (trial, reviewer) and never deleted: an undo writes a
revision (a clearing has verdict ""), so version numbers only grow."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def fill_trial_and_reviewer(apps, schema_editor):
    LabelRevision = apps.get_model("labeling", "LabelRevision")
    for rev in LabelRevision.objects.select_related("label").iterator():
        rev.trial_id, rev.reviewer_id = rev.label.trial_id, rev.label.reviewer_id
        rev.save(update_fields=["trial", "reviewer"])


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0010_suite_trust_thresholds"),
        ("labeling", "0006_preference_label_tie"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="labelrevision", name="label_revision_unique"),
        migrations.AddField(
            model_name="labelrevision",
            name="trial",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="label_revisions",
                to="evals.trial",
            ),
        ),
        migrations.AddField(
            model_name="labelrevision",
            name="reviewer",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="label_revisions",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddField(
            model_name="labelrevision",
            name="undoes",
            field=models.PositiveIntegerField(
                blank=True, help_text="the version this undo took back (null: a save)", null=True
            ),
        ),
        migrations.RunPython(fill_trial_and_reviewer, migrations.RunPython.noop),
        # Imported labels have no revisions; a revision without a reviewer cannot exist.
        migrations.AlterField(
            model_name="labelrevision",
            name="trial",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE,
                related_name="label_revisions",
                to="evals.trial",
            ),
        ),
        migrations.AlterField(
            model_name="labelrevision",
            name="reviewer",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.PROTECT,
                related_name="label_revisions",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AlterField(
            model_name="labelrevision",
            name="label",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="revisions",
                to="labeling.label",
            ),
        ),
        migrations.AlterField(
            model_name="labelrevision",
            name="verdict",
            field=models.CharField(
                blank=True, choices=[("pass", "pass"), ("fail", "fail")], max_length=4
            ),
        ),
        migrations.AlterModelOptions(
            name="labelrevision",
            options={"ordering": ["trial_id", "reviewer_id", "version"]},
        ),
        migrations.AddConstraint(
            model_name="labelrevision",
            constraint=models.UniqueConstraint(
                fields=("trial", "reviewer", "version"), name="label_revision_unique_version"
            ),
        ),
    ]

from django.db import migrations, models


def one_preference_per_reviewer(apps, schema_editor):
    """Before the constraint: a reviewer's duplicate preferences on a pair (a race of the old
    replace-by-lookup save could leave two, and no save could reach them after) keep the
    newest row, the one a reader of the pair saw last."""
    PreferenceLabel = apps.get_model("labeling", "PreferenceLabel")
    seen: set[tuple[int, int]] = set()
    stale = []
    rows = PreferenceLabel.objects.filter(reviewer__isnull=False).order_by("-id")
    for pk, pair_id, reviewer_id in rows.values_list("id", "pair_id", "reviewer_id").iterator():
        if (pair_id, reviewer_id) in seen:
            stale.append(pk)
        seen.add((pair_id, reviewer_id))
    PreferenceLabel.objects.filter(id__in=stale).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0011_label_revision_details"),
    ]

    operations = [
        migrations.AddField(
            model_name="preferencelabel",
            name="version",
            field=models.PositiveIntegerField(
                default=1,
                help_text="1 for a reviewer's first preference on the pair; each change adds "
                "one (a form showing no preference carries 0)",
            ),
        ),
        migrations.RunPython(one_preference_per_reviewer, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="preferencelabel",
            constraint=models.UniqueConstraint(
                condition=models.Q(reviewer__isnull=False),
                fields=("pair", "reviewer"),
                name="preference_label_one_per_reviewer",
            ),
        ),
    ]

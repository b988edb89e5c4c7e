"""Pairwise approvals name their suite by uuid too (``figures["suite_uuid"]``): the trust
recheck matches the suite itself, since a suite can be renamed. Filled in here for approvals
whose ``suite_name`` still names a suite."""

from django.db import migrations


def suite_uuid_fill(apps, schema_editor):
    JudgeApproval = apps.get_model("judges", "JudgeApproval")
    Suite = apps.get_model("evals", "Suite")
    uuids = dict(Suite.objects.values_list("name", "uuid"))
    for approval in JudgeApproval.objects.filter(figures__kind="pairwise").iterator():
        figures = approval.figures or {}
        name = figures.get("suite_name")
        if name is None or "suite_uuid" in figures or name not in uuids:
            continue
        figures["suite_uuid"] = str(uuids[name])
        JudgeApproval.objects.filter(pk=approval.pk).update(figures=figures)


class Migration(migrations.Migration):
    dependencies = [
        ("labeling", "0012_preference_label_version"),
        ("judges", "0012_cost_usd_to_1e_12"),
        ("evals", "0022_modelprice_to_providers"),
    ]

    operations = [migrations.RunPython(suite_uuid_fill, migrations.RunPython.noop)]

"""``JudgeApproval`` arrives from labeling (state only: its table was renamed there), and
trust is stored once: ``JudgeVersion.trusted_at`` goes, an active approval is the trust."""

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def check_trust_is_stored_once(apps, schema_editor):
    """Refuse to drop ``trusted_at`` while it disagrees with the approvals (it never should:
    both were always written together)."""
    JudgeVersion = apps.get_model("judges", "JudgeVersion")
    JudgeApproval = apps.get_model("judges", "JudgeApproval")
    active = set(
        JudgeApproval.objects.filter(revoked_at__isnull=True).values_list(
            "judge_version_id", flat=True
        )
    )
    trusted = set(
        JudgeVersion.objects.filter(trusted_at__isnull=False).values_list("id", flat=True)
    )
    if active != trusted:
        raise RuntimeError(
            "judge versions whose trusted_at disagrees with their approvals: "
            f"{sorted(active ^ trusted)}; fix them before migrating"
        )


class Migration(migrations.Migration):
    dependencies = [
        ("judges", "0003_proberun"),
        ("labeling", "0003_judgeapproval_moves_to_judges"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="JudgeApproval",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("uuid", models.UUIDField(default=uuid.uuid4, editable=False, unique=True)),
                        ("approved_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("figures", models.JSONField(default=dict)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        ("revoke_reason", models.TextField(blank=True)),
                        (
                            "approved_by",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="judge_approvals",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "calibration_set",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="approvals",
                                to="labeling.calibrationset",
                            ),
                        ),
                        (
                            "judge_version",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="approvals",
                                to="judges.judgeversion",
                            ),
                        ),
                        (
                            "revoked_by",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="judge_revocations",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                    ],
                    options={
                        "ordering": ["-approved_at", "-id"],
                        "constraints": [
                            models.UniqueConstraint(
                                condition=models.Q(("revoked_at__isnull", True)),
                                fields=("judge_version",),
                                name="judge_approval_one_active",
                            )
                        ],
                    },
                ),
            ],
        ),
        migrations.RunPython(check_trust_is_stored_once, migrations.RunPython.noop),
        migrations.RemoveField(model_name="judgeversion", name="trusted_at"),
    ]

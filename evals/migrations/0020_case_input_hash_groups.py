"""Each case's group key, ``input_hash`` (SHA-256 of its input and context documents),
filled for the cases already stored: blind reviewing hides the verdicts of every case asked
the same thing."""

import hashlib
import json

from django.db import migrations, models

BATCH = 2000


def _input_hash(input, context) -> str:
    # evals.models.input_hash as of this migration (a migration keeps its own copy).
    payload = json.dumps(
        {"input": input, "context": context},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def backfill(apps, schema_editor):
    """Hash every case's input and context, in batches of ``BATCH`` rows (one read, one update each)."""
    Case = apps.get_model("evals", "Case")
    last = 0
    while True:
        batch = list(
            Case.objects.filter(id__gt=last).order_by("id").only("id", "input", "context")[:BATCH]
        )
        if not batch:
            return
        for case in batch:
            case.input_hash = _input_hash(case.input, case.context)
        Case.objects.bulk_update(batch, ["input_hash"])
        last = batch[-1].id


class Migration(migrations.Migration):
    dependencies = [
        ("evals", "0019_run_trials_cancelled"),
    ]

    operations = [
        migrations.AddField(
            model_name="case",
            name="input_hash",
            field=models.CharField(db_index=True, default="", editable=False, max_length=64),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]

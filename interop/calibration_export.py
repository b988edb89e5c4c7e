"""The calibration export: one row per item of a calibration set with the judge's verdict,
every human label, the adjudication, the reference verdict and their agreement, as an
``interop.exports.ExportTable``. Six queries whatever the set's size.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, tzinfo

import pyarrow as pa

from evals.models import Grade
from interop.exports import ExportTable
from judges.models import JudgeVersion
from labeling.freeze import revisions_after_reveal
from labeling.models import CalibrationSet, Label
from labeling.selectors import reference_labels

LABEL_FIELDS = ("verdict", "critique", "labeled_at")


def _rater_columns(labels: list[Label]) -> dict[tuple[str, str], str]:
    """Rater key -> header name: a reviewer's username, or an imported label's name (with
    `` (imported)`` when a reviewer has the same name)."""
    users = {lab.reviewer.username for lab in labels if lab.reviewer is not None}
    names: dict[tuple[str, str], str] = {}
    for lab in labels:
        if lab.reviewer is not None:
            names[("user", lab.reviewer.username)] = lab.reviewer.username
        else:
            name = lab.reviewer_name or "unknown"
            names[("name", name)] = f"{name} (imported)" if name in users else name
    return names


def _rater(label: Label) -> tuple[str, str]:
    if label.reviewer is not None:
        return ("user", label.reviewer.username)
    return ("name", label.reviewer_name or "unknown")


def calibration_table(
    *,
    calibration_set: CalibrationSet,
    judge_version: JudgeVersion | None = None,
    zone: tzinfo = UTC,
) -> ExportTable:
    """One row per item of ``calibration_set`` in queue order, judged by ``judge_version``
    (default: the version that stratified the set; None: judge columns null). Columns:

    - ``calibration_set``, ``calibration_set_name``, ``position`` (1-based), ``trial``,
      ``case_id``, ``attempt``;
    - ``judge_version`` ("name vN"), ``judge_status``, ``judge_verdict`` (null without a
      verdict), ``judge_reason``;
    - per rater by name: ``label.<rater>.verdict``, ``.critique``, ``.labeled_at`` (in
      ``zone``), ``.guidelines_version``, ``.revised_after_reveal`` (the newest revision saved
      after the judge's verdicts were visible: never the label of record, never in ``agree``);
    - ``adjudicated_verdict``, ``adjudication_reason``, ``reference_verdict``,
      ``reference_basis`` (``labeling.selectors.reference_labels``);
    - ``agree``: judge == reference, null when either is undefined, so its ``true`` count and
      non-null count are ``calibration_compute``'s ``agreement_numerator`` and ``n``;
    - ``stratum``, ``inclusion_probability`` (pi; weight 1 / pi), null for items added by hand.
    Long by design: the columns are declared next to the values that fill them."""
    version = judge_version if judge_version is not None else calibration_set.judge_version
    items = list(calibration_set.items.select_related("trial__case").order_by("position", "id"))
    trial_ids = [item.trial_id for item in items]
    grades: dict[int, Grade] = {}
    if version is not None:
        grades = {
            g.trial_id: g
            for g in Grade.objects.filter(judge_version=version, trial_id__in=trial_ids).only(
                "id", "trial_id", "status", "passed", "reason"
            )
        }
    labels = list(
        Label.objects.filter(trial_id__in=trial_ids)
        .select_related("reviewer", "guidelines")
        .order_by("trial_id", "created_at", "id")
    )
    by_trial: dict[int, dict[tuple[str, str], Label]] = defaultdict(dict)
    for label in labels:
        by_trial[label.trial_id][_rater(label)] = label
    flagged = revisions_after_reveal(trial_ids=trial_ids).by_label
    raters = _rater_columns(labels)
    order = sorted(raters, key=lambda key: (raters[key], key))
    refs = reference_labels(trial_ids=trial_ids)
    unresolved, unlabeled = set(refs.unresolved), set(refs.unlabeled)
    stamp = pa.timestamp("us", tz=str(zone))
    columns: list[tuple[str, pa.DataType]] = [
        ("calibration_set", pa.string()),
        ("calibration_set_name", pa.string()),
        ("position", pa.int64()),
        ("trial", pa.string()),
        ("case_id", pa.string()),
        ("attempt", pa.int64()),
        ("judge_version", pa.string()),
        ("judge_status", pa.string()),
        ("judge_verdict", pa.string()),
        ("judge_reason", pa.string()),
    ]
    for key in order:
        columns += [
            (f"label.{raters[key]}.verdict", pa.string()),
            (f"label.{raters[key]}.critique", pa.string()),
            (f"label.{raters[key]}.labeled_at", stamp),
            (f"label.{raters[key]}.guidelines_version", pa.int64()),
            (f"label.{raters[key]}.revised_after_reveal", pa.string()),
        ]
    columns += [
        ("adjudicated_verdict", pa.string()),
        ("adjudication_reason", pa.string()),
        ("reference_verdict", pa.string()),
        ("reference_basis", pa.string()),
        ("agree", pa.bool_()),
        ("stratum", pa.string()),
        ("inclusion_probability", pa.float64()),
    ]
    rows = []
    for item in items:
        trial, grade = item.trial, grades.get(item.trial_id)
        judge_verdict = None
        if grade is not None and grade.status == Grade.Status.OK and grade.passed is not None:
            judge_verdict = "pass" if grade.passed else "fail"
        row = [
            str(calibration_set.uuid),
            calibration_set.name,
            item.position + 1,
            str(trial.uuid),
            trial.case.key,
            trial.attempt,
            str(version) if version is not None else None,
            grade.status if grade is not None else None,
            judge_verdict,
            grade.reason if grade is not None else None,
        ]
        for key in order:
            lab = by_trial[item.trial_id].get(key)
            if lab is None:
                row += [None, None, None, None, None]
                continue
            revision = flagged.get((lab.trial_id, lab.reviewer_id)) if lab.reviewer_id else None
            row += [
                lab.verdict,
                lab.critique,
                lab.updated_at.astimezone(zone),
                lab.guidelines.version if lab.guidelines is not None else None,
                revision.verdict if revision is not None else None,
            ]
        ref = refs.by_trial.get(item.trial_id)
        adjudication = ref if ref is not None and ref.basis == "adjudication" else None
        basis: str | None
        if ref is not None:
            basis = ref.basis
        elif item.trial_id in unresolved:
            basis = "unresolved"
        else:
            basis = "unlabeled" if item.trial_id in unlabeled else None
        reference = ref.verdict if ref is not None else None
        row += [
            adjudication.verdict if adjudication is not None else None,
            adjudication.critique if adjudication is not None else None,
            reference,
            basis,
            (judge_verdict == reference)
            if judge_verdict is not None and reference is not None
            else None,
            item.stratum or None,
            item.inclusion_probability,
        ]
        rows.append(row)
    return ExportTable(columns=columns, rows=rows)

"""The judge improvement loop: disagreements and critiques become few-shot examples of a new
version (leads only), compared on labels none was built from. The chosen labels are the
version's development data (``DevelopmentLabel``), left out of its figures and trust.
Examples are untrusted text, fenced per call (``judges.prompts.examples_render``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q

from core.errors import DomainError
from core.roles import LEAD, role_require
from evals.models import Grade, Trial
from judges import kinds
from judges.models import DevelopmentLabel, Judge, JudgeVersion
from judges.models.development import development_trial_ids
from judges.versions import judge_version_create
from labeling.figures import Calibration, Disagreement
from labeling.models import CalibrationSet, Label
from labeling.selectors import calibration_compute, reference_labels
from stats.intervals import wilson_interval

IMPROVABLE_KINDS = (kinds.RUBRIC, kinds.FAITHFULNESS)
MAX_EXAMPLES = 20
EXAMPLE_CHARS = 4000  # per text of an example; longer texts are cut, with a marker

EXAMPLES_INTRO = (
    "Examples judged by human reviewers, with their critiques (learn from them; they are "
    "not the case to judge):\n$examples\n\n"
)


def _cut(text: str) -> str:
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + " [...cut]"


def improved_template_default(*, base_version: JudgeVersion) -> str:
    """The base version's template with the examples section put first (unchanged when it
    already writes ``$examples``): what the improve page offers to edit."""
    template = base_version.prompt_template or kinds.DEFAULT_TEMPLATES[base_version.judge.kind]
    return template if "$examples" in template else EXAMPLES_INTRO + template


def _improvable(base_version: JudgeVersion) -> None:
    kind = base_version.judge.kind
    if kind not in IMPROVABLE_KINDS:
        raise DomainError(
            f"a {kind} judge cannot be improved with examples here (only "
            f"{', '.join(IMPROVABLE_KINDS)} judges Assay calls)",
            field="base_version",
        )


def _label_ids(label_ids: Iterable) -> list[int]:
    try:
        ids = sorted({int(x) for x in label_ids})
    except (TypeError, ValueError) as exc:
        raise DomainError("expected label ids (integers)", field="label_ids") from exc
    if not ids:
        raise DomainError("choose at least one example", field="label_ids")
    return ids


def _examples(*, base_version: JudgeVersion, ids: list[int]) -> tuple[list[dict], list[Label]]:
    """The new version's examples (the base's, then one per newly chosen trial, verdict and
    critique from the trial's human reference) and the chosen labels."""
    labels = list(Label.objects.filter(id__in=ids).select_related("trial__case"))
    missing = set(ids) - {lab.id for lab in labels}
    if missing:
        raise DomainError(
            f"no such label(s): {sorted(missing)}", field="label_ids", code="not_found"
        )
    refs = reference_labels(trial_ids={lab.trial_id for lab in labels})
    examples = list(base_version.params.get("examples") or [])
    seen = {ex.get("trial") for ex in examples}
    show_input = base_version.judge.kind == kinds.RUBRIC  # faithfulness never sees the input
    for lab in sorted(labels, key=lambda x: (x.trial.case.key, x.trial.attempt, x.id)):
        trial = lab.trial
        ref = refs.by_trial.get(trial.id)
        if ref is None:
            raise DomainError(
                f"case {trial.case.key} (attempt {trial.attempt}): the reviewers disagree and "
                "no lead has adjudicated it; adjudicate it first",
                field="label_ids",
            )
        if str(trial.uuid) in seen:
            continue
        seen.add(str(trial.uuid))
        examples.append(
            {
                "trial": str(trial.uuid),
                "input": _cut(trial.case.input_text) if show_input else None,
                "output": _cut(trial.output or ""),
                "verdict": ref.verdict,
                "critique": _cut(ref.critique),
            }
        )
    if len(examples) > MAX_EXAMPLES:
        raise DomainError(
            f"{len(examples)} examples (with the base version's); at most {MAX_EXAMPLES}",
            field="label_ids",
            code="too_large",
        )
    return examples, labels


def _template(base_version: JudgeVersion, prompt_template: str) -> str:
    template = (prompt_template or "").replace("\r\n", "\n")
    names = kinds.template_check(base_version.judge.kind, template)
    if "examples" not in names:
        raise DomainError(
            "does not use $examples: the chosen examples would not reach the judge",
            field="prompt_template",
        )
    return template


def improve_preview(
    *, base_version: JudgeVersion, label_ids: Iterable, prompt_template: str
) -> str:
    """The system and user messages the improved version would send, the trial's texts as
    placeholders; raises as ``judge_version_improve`` (no role check: it writes nothing).
    """
    _improvable(base_version)
    examples, _labels = _examples(base_version=base_version, ids=_label_ids(label_ids))
    template = _template(base_version, prompt_template)
    built = kinds.call_build(
        kind=base_version.judge.kind,
        template=template,
        criteria=str(base_version.params.get("criteria", "")),
        material=kinds.Material(
            output="(the output to judge)",
            input="(the case input)",
            reference="(the reference answer)",
            documents=[{"id": "d", "text": "(a document)"}],
        ),
        output_schema=base_version.output_schema or None,
        threshold=base_version.threshold,
        examples=examples,
    )
    return built.prompt.text


def judge_version_improve(
    *, base_version: JudgeVersion, label_ids: Iterable, prompt_template: str, by
) -> JudgeVersion:
    """A new version of ``base_version``'s judge with few-shot examples from ``label_ids`` (per
    trial: reference verdict, critique, output, and rubric judges' input) after the base's.

    Leads only (PermissionDenied). DomainError fields: ``base_version`` (kind cannot be
    improved; code "conflict" when identical to an existing version), ``label_ids`` (none,
    unknown, unresolved, past ``MAX_EXAMPLES``), ``prompt_template`` (no ``$examples``).
    """
    role_require(by, LEAD, action="building an improved judge version")
    _improvable(base_version)
    examples, labels = _examples(base_version=base_version, ids=_label_ids(label_ids))
    template = _template(base_version, prompt_template)
    with transaction.atomic():
        version, created = judge_version_create(
            judge_name=base_version.judge.name,
            kind=base_version.judge.kind,
            model=base_version.model,
            base_url=base_version.base_url,
            prompt_template=template,
            params={**base_version.params, "examples": examples},
            output_schema=base_version.output_schema,
            threshold=base_version.threshold,
        )
        if not created:
            raise DomainError(
                f"identical to the existing {version}: change the examples or the prompt",
                field="base_version",
                code="conflict",
            )
        rows = [
            DevelopmentLabel(judge_version=version, trial_id=d.trial_id, label_id=d.label_id)
            for d in base_version.development_labels.all()
        ]
        inherited = {r.label_id for r in rows}
        rows += [
            DevelopmentLabel(judge_version=version, trial_id=lab.trial_id, label=lab)
            for lab in labels
            if lab.id not in inherited
        ]
        DevelopmentLabel.objects.bulk_create(rows)
    return version


# --- reads for the pages --------------------------------------------------------------------


def development_count(*, judge_version: JudgeVersion) -> int:
    """How many trials ``judge_version`` was built from (its development data)."""
    return len(development_trial_ids([judge_version.id]))


@dataclass(frozen=True)
class Candidate:
    """A disagreement offered as an example: the trial's output and input, and the ids of
    its current labels (all recorded as development data when chosen)."""

    disagreement: Disagreement
    output: str
    input: str
    label_ids: list[int]

    @property
    def choice(self) -> str:
        """The checkbox value: the label ids, comma-separated."""
        return ",".join(str(i) for i in self.label_ids)


def improve_candidates(
    *, base_version: JudgeVersion, calibration_set: CalibrationSet | None
) -> tuple[Calibration, list[Candidate]]:
    """The base version's calibration on the scope (a set, or every labeled trial) and its
    disagreements as candidates (trials it was already built from are not among them)."""
    cal = calibration_compute(judge_version=base_version, calibration_set=calibration_set)
    ids = [d.trial_id for d in cal.disagreements]
    labels: dict[int, list[int]] = {}
    for tid, lid in Label.objects.filter(trial_id__in=ids).values_list("trial_id", "id"):
        labels.setdefault(tid, []).append(lid)
    trials = Trial.objects.select_related("case").in_bulk(ids)
    out = [
        Candidate(
            d,
            trials[d.trial_id].output or "",
            trials[d.trial_id].case.input_text,
            sorted(labels.get(d.trial_id, [])),
        )
        for d in cal.disagreements
        if labels.get(d.trial_id)
    ]
    return cal, out


@dataclass(frozen=True)
class VersionRow:
    """One compared version: its figures on the common items and the Wilson 95% interval
    of its raw agreement (None when n = 0)."""

    version: JudgeVersion
    calibration: Calibration
    agreement_ci: tuple[float, float] | None


@dataclass(frozen=True)
class VersionsComparison:
    """Versions of one judge on the same held-out items: ``n_items`` labeled trials every
    version judged ok and none was built from; ``n_development`` left out; ``rows`` newest
    first.
    """

    judge: Judge
    n_items: int
    n_development: int
    rows: list[VersionRow]


def versions_compare(*, judge: Judge, limit: int = 6) -> VersionsComparison:
    """The newest ``limit`` versions of a pointwise ``judge`` compared on the same items (each
    has an ok verdict, none was built from them), through ``calibration_compute``.
    Queries: 2 per version plus ``calibration_compute``'s.
    """
    versions = list(judge.versions.order_by("-number")[: limit * 4])
    judged: dict[int, set[int]] = {}
    for v in versions:
        ids = set(
            Grade.objects.filter(judge_version=v, status=Grade.Status.OK, passed__isnull=False)
            .filter(Q(trial__labels__isnull=False) | Q(trial__adjudications__isnull=False))
            .values_list("trial_id", flat=True)
        )
        if ids:
            judged[v.id] = ids
        if len(judged) == limit:
            break
    compared = [v for v in versions if v.id in judged]
    if not compared:
        return VersionsComparison(judge, 0, 0, [])
    common = set.intersection(*judged.values())
    development = development_trial_ids(judged) & common
    items = common - development
    rows = []
    for v in compared:
        cal = calibration_compute(judge_version=v, within_trial_ids=items)
        ci = wilson_interval(cal.agreement_numerator, cal.n) if cal.n else None
        rows.append(VersionRow(v, cal, ci))
    return VersionsComparison(judge, len(items), len(development), rows)

"""The judge improvement loop: a lead turns disagreements (judge verdict vs human label) and
the reviewers' critiques into few-shot examples of a new judge version, and versions are
compared on labels none of them was built from.

Rules (issue 12, point 4):
- Only a lead builds an improved version (``judge_version_improve``): it chooses what a
  judge is taught, and the same role decides trust; reviewers and engineers are refused.
- Every label an example comes from is recorded as the new version's development data
  (``judges.models.DevelopmentLabel``), inherited examples included. The version's
  calibration figures and trust leave those trials out
  (``labeling.selectors.calibration_compute``) and ``judges.trust.trust_grant`` refuses
  figures that did not.
- Examples are untrusted text (model outputs, critiques): stored as data in
  ``params["examples"]`` and fenced with each call's nonce where the template writes
  ``$examples`` (``judges.prompts.examples_render``), never pasted into the template.
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
    """The prompt (system and user messages) the improved version would send, the trial's
    own texts shown as placeholders in their fences; raises what ``judge_version_improve``
    raises for the same input (but no role check: it changes nothing)."""
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
    """A new version of ``base_version``'s judge whose prompt shows few-shot examples made
    from the labels ``label_ids`` (one per trial: its human reference verdict and critique,
    the trial's output, and for rubric judges the case input), after the base version's
    own examples; same model, endpoint, parameters, schema and threshold.

    ``prompt_template`` (edited by the lead) must write ``$examples`` and pass the kind's
    template check. Records every chosen label, and the base version's development labels,
    as the new version's development data. Leads only (PermissionDenied otherwise).
    Raises ``DomainError``: field ``base_version`` (a kind that cannot be improved),
    ``label_ids`` (none, unknown, a trial whose reviewers disagree unadjudicated, more
    than ``MAX_EXAMPLES`` examples), ``prompt_template`` (the kind's check; no
    ``$examples``), ``base_version`` with code "conflict" when the result is identical to an
    existing version (versions are content-addressed; the existing one keeps its own data).
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
    """Versions of one judge side by side on the same held-out items: ``n_items`` labeled
    trials every compared version judged (ok verdict) and none was built from;
    ``n_development`` labeled trials left out because some compared version was built from
    them. ``rows``: each version's figures on those items (newest first)."""

    judge: Judge
    n_items: int
    n_development: int
    rows: list[VersionRow]


def versions_compare(*, judge: Judge, limit: int = 6) -> VersionsComparison:
    """The newest ``limit`` versions of a pointwise ``judge`` with verdicts on labeled
    trials, compared on the same items: the labeled (or adjudicated) trials each of them
    has an ok verdict on, minus every compared version's development trials. Agreement,
    kappa and FAR with their 95% intervals come from ``calibration_compute`` restricted to
    those items (so an unresolved trial is left out of every row alike).
    Queries: 2 per version plus ``calibration_compute``'s per version."""
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

"""Labeled records (``shared/data/README.md`` format): validate strictly, then store.

No coercion: ``"false"`` is not ``False``, ``"Pass"`` not ``"pass"``; errors read ``line 17:
field human_label.value: expected 'pass' or 'fail', got 'Pass'``. NaN/Infinity only in
``judge_labels[].score`` (stored null). A record holds ok responses only: a ``status`` or
``error`` key saying otherwise is refused. Input and context <= 200,000 characters as JSON.

A ``pointwise_binary`` record becomes, in run ``<run>``:
- a Case (key ``id``, context ``[{id: doc_id, text}]``, tags [category] + tags, expected
  null; through ``cases_upsert``);
- a Trial (attempt 1, ok, output the response text; raw_response ``{"response", "model",
  "dataset", "split", "source"}``);
- a Label (source import, reviewer ``dataset gold``, critique from
  ``human_label.details.critique``);
- a gating Grade ``human-label``: the run's pass rate is the human verdict;
- per recorded judge a provisional Grade under the version's ``grader_key`` (null value:
  errored, ``unparseable``); the recorded score (e.g. 0-9) in ``details.score``, not
  ``Grade.score`` (0..1).

A ``pairwise_preference`` record becomes a Case, a Trial in each of runs ``<run> / A`` and
``<run> / B``, a TrialPair, a PreferenceLabel and a PairwiseVerdict per (judge, position) in
the original A/B naming.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from core.errors import DomainError
from core.strict_json import NON_FINITE, contains_non_finite
from core.text import unstorable_refuse
from evals.blindness import GOLD_GRADER
from evals.cases import CaseSpec, context_problem, size_problem, tags_problem
from evals.grading.grader_set import IMPORTED_KIND, RECORDED_JUDGE_KIND
from evals.models import Grade, Trial, TrialPair
from interop.importers.context import BATCH_SIZE, ImportContext, run_finish
from interop.importers.reader import record_error
from judges.models import PairwiseVerdict
from labeling.models import Label, PreferenceLabel

POINTWISE = "pointwise_binary"
PAIRWISE = "pairwise_preference"
HUMAN_GRADER = GOLD_GRADER  # evals.blindness hides it like a gold label
# Imported human labels are the dataset's gold; the method stays in details.human_label.
GOLD_REVIEWER = "dataset gold"
KEY_MAX = 200

_MISSING = object()


_TAG_INDEX = re.compile(r"tags\[\d+\]")


def _record_tag(case_path: str) -> str:
    """A case tag's path in the record's words: the case's tags are [category, *tags]."""
    if case_path == "tags":
        return case_path
    index = int(case_path[len("tags[") : -1])
    return "category" if index == 0 else f"tags[{index - 1}]"


def _record_tag_match(match: re.Match) -> str:
    return _record_tag(match.group(0))


def _fail(line: int, path: str, msg: str) -> DomainError:
    return record_error(f"line {line}", path, msg, record=line)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "NaN/Infinity"


def _get(obj: dict, key: str, line: int, path: str) -> Any:
    if key not in obj:
        raise _fail(line, path, "missing")
    return obj[key]


def _str(obj: dict, key: str, line: int, path: str, *, nonempty: bool = False) -> str:
    value = _get(obj, key, line, path)
    if not isinstance(value, str):
        raise _fail(line, path, f"expected a string, got {_type_name(value)} {_show(value)}")
    if nonempty and not value.strip():
        raise _fail(line, path, "must not be empty")
    return value


def _str_or_null(obj: dict, key: str, line: int, path: str) -> str | None:
    value = _get(obj, key, line, path)
    if value is not None and not isinstance(value, str):
        got = f"{_type_name(value)} {_show(value)}"
        raise _fail(line, path, f"expected a string or null, got {got}")
    return value


def _choice(
    obj: dict, key: str, line: int, path: str, choices: tuple, *, nullable: bool = False
) -> Any:
    value = _get(obj, key, line, path)
    if value is None and nullable:
        return None
    if not isinstance(value, str) or value not in choices:
        want = " or ".join(repr(c) for c in choices)
        if nullable:
            want += " or null"
        raise _fail(line, path, f"expected {want}, got {_show(value)}")
    return value


def _list(obj: dict, key: str, line: int, path: str) -> list:
    value = _get(obj, key, line, path)
    if not isinstance(value, list):
        raise _fail(line, path, f"expected an array, got {_type_name(value)}")
    return value


def _dict(value: Any, line: int, path: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(line, path, f"expected an object, got {_type_name(value)}")
    return value


@dataclass(frozen=True)
class JudgeLabel:
    judge_model: str
    judge_type: str
    protocol: str
    position: str | None
    value: str | None
    score: float | None
    rationale: str | None
    raw: dict


@dataclass(frozen=True)
class LabeledRecord:
    """One validated record; ``responses`` maps response_id -> response object."""

    line: int
    id: str
    task_type: str
    dataset: str
    split: str
    category: str
    tags: list[str]
    input: str
    context: list[dict]
    responses: dict[str, dict]
    human_value: str
    human_method: str
    human_label: dict
    human_annotations: list
    judges: list[JudgeLabel]
    source: dict

    @property
    def case_spec(self) -> CaseSpec:
        return CaseSpec(
            key=self.id,
            input=self.input,
            expected=None,
            context=self.context,
            tags=[self.category, *self.tags],
        )


def _ok_only(obj: dict, line: int, prefix: str) -> None:
    """Refuse a ``status``/``error`` key of ``obj`` (any case and spacing) saying the trial is not
    ok, named ``<prefix><key>``: an errored trial carries no verdict, so it cannot be labeled."""
    for key, value in obj.items():
        name = key.strip().lower()
        if name == "status" and value != "ok":
            raise _fail(
                line,
                f"{prefix}{key}",
                f"a labeled record holds ok trials only, got status {_show(value)}: an "
                "errored trial carries no verdict and is never labeled; leave it out",
            )
        if name == "error" and value not in (None, ""):
            raise _fail(
                line,
                f"{prefix}{key}",
                f"a labeled record holds ok trials only, got an error {_show(value)}: an "
                "errored trial carries no verdict and is never labeled; leave it out",
            )


def record_validate(obj: dict, line: int) -> LabeledRecord:
    """Check one record; raises ``DomainError`` naming the line and dotted field path. Long by
    design: one check per field, in the format's order."""
    rid = _str(obj, "id", line, "id", nonempty=True)
    if len(rid) > KEY_MAX:
        raise _fail(line, "id", f"longer than {KEY_MAX} characters ({len(rid)})")
    task_type = _choice(obj, "task_type", line, "task_type", (POINTWISE, PAIRWISE))
    dataset = _str(obj, "dataset", line, "dataset")
    split = _str(obj, "split", line, "split")
    category = _str(obj, "category", line, "category")
    tags = _list(obj, "tags", line, "tags")
    for i, tag in enumerate(tags):
        if not isinstance(tag, str):
            raise _fail(line, f"tags[{i}]", f"expected a string, got {_type_name(tag)}")
    text_input = _str(obj, "input", line, "input")

    context = []
    for i, doc in enumerate(_list(obj, "context", line, "context")):
        doc = _dict(doc, line, f"context[{i}]")
        doc_id = _str(doc, "doc_id", line, f"context[{i}].doc_id")
        text = _str(doc, "text", line, f"context[{i}].text")
        if "source_doc_key" in doc:
            _str_or_null(doc, "source_doc_key", line, f"context[{i}].source_doc_key")
        context.append({"id": doc_id, "text": text})
    problem = context_problem(context)  # the case rule: each document's id once
    if problem is not None:
        path, message = problem
        raise _fail(line, f"context{path.replace('.id', '.doc_id')}", message)
    problem = tags_problem([category, *tags])  # the case's tags: the category, then tags
    if problem is not None:
        path, message = problem
        raise _fail(line, _record_tag(f"tags{path}"), _TAG_INDEX.sub(_record_tag_match, message))

    wanted = ("R",) if task_type == POINTWISE else ("A", "B")
    _ok_only(obj, line, "")
    responses: dict[str, dict] = {}
    for i, resp in enumerate(_list(obj, "responses", line, "responses")):
        resp = _dict(resp, line, f"responses[{i}]")
        _ok_only(resp, line, f"responses[{i}].")
        rid_ = _choice(resp, "response_id", line, f"responses[{i}].response_id", wanted)
        _str_or_null(resp, "model", line, f"responses[{i}].model")
        _str(resp, "text", line, f"responses[{i}].text")
        if rid_ in responses:
            raise _fail(line, f"responses[{i}].response_id", f"{rid_!r} appears twice")
        responses[rid_] = resp
    if set(responses) != set(wanted):
        raise _fail(
            line,
            "responses",
            f"a {task_type} record needs responses "
            f"{', '.join(wanted)}; got {', '.join(sorted(responses)) or 'none'}",
        )

    label_type, vocab = (
        ("pass_fail", ("pass", "fail")) if task_type == POINTWISE else ("preference", ("A", "B"))
    )
    human = _dict(_get(obj, "human_label", line, "human_label"), line, "human_label")
    _choice(human, "type", line, "human_label.type", (label_type,))
    human_value = _choice(human, "value", line, "human_label.value", vocab)
    method = _str(human, "method", line, "human_label.method")
    _dict(_get(human, "details", line, "human_label.details"), line, "human_label.details")

    annotations = _list(obj, "human_annotations", line, "human_annotations")
    for i, ann in enumerate(annotations):
        _dict(ann, line, f"human_annotations[{i}]")

    positions = (None,) if task_type == POINTWISE else ("original", "swapped")
    judges: list[JudgeLabel] = []
    seen: dict[tuple, int] = {}
    for i, jl in enumerate(_list(obj, "judge_labels", line, "judge_labels")):
        p = f"judge_labels[{i}]"
        jl = _dict(jl, line, p)
        model = _str(jl, "judge_model", line, f"{p}.judge_model", nonempty=True)
        jtype = _str(jl, "judge_type", line, f"{p}.judge_type")
        protocol = _str(jl, "protocol", line, f"{p}.protocol")
        position = _get(jl, "position", line, f"{p}.position")
        if position not in positions:
            want = "null" if task_type == POINTWISE else "'original' or 'swapped'"
            raise _fail(
                line,
                f"{p}.position",
                f"expected {want} for a {task_type} record, got {_show(position)}",
            )
        value = _choice(jl, "value", line, f"{p}.value", vocab, nullable=True)
        score = _get(jl, "score", line, f"{p}.score")
        if isinstance(score, NON_FINITE):
            score = None  # documented: a bare NaN/Infinity score is "no score"
        elif score is not None and (isinstance(score, bool) or not isinstance(score, int | float)):
            raise _fail(
                line,
                f"{p}.score",
                f"expected a number or null, got {_type_name(score)} {_show(score)}",
            )
        rationale = _str_or_null(jl, "rationale", line, f"{p}.rationale")
        ident = (model, protocol, position)
        if ident in seen:
            raise _fail(
                line,
                p,
                f"judge {model!r} / {protocol!r} position {position!r} "
                f"already given in judge_labels[{seen[ident]}]",
            )
        seen[ident] = i
        raw = {k: (None if isinstance(v, NON_FINITE) else v) for k, v in jl.items()}
        judges.append(JudgeLabel(model, jtype, protocol, position, value, score, rationale, raw))

    source = obj.get("source", {})
    if source is not None:
        _dict(source, line, "source")
    for key, value in obj.items():
        if key != "judge_labels" and contains_non_finite(value):
            raise _fail(line, key, "NaN/Infinity is not valid JSON")

    labeled = LabeledRecord(
        line=line,
        id=rid,
        task_type=task_type,
        dataset=dataset,
        split=split,
        category=category,
        tags=list(tags),
        input=text_input,
        context=context,
        responses=responses,
        human_value=human_value,
        human_method=method,
        human_label=human,
        human_annotations=annotations,
        judges=judges,
        source=source or {},
    )
    problem = size_problem(labeled.case_spec)  # the case rule of every path
    if problem is not None:
        name, message = problem
        raise record_error(f"line {line}", name, message, record=line, code="too_large")
    return labeled


def _records_checked(records: Iterator[tuple[int, dict]]) -> Iterator[LabeledRecord]:
    """Validate records, one kind per file, unique ids (naming both lines), no unstorable text
    (``core.text``)."""
    kind: tuple[str, int] | None = None
    ids: dict[str, int] = {}
    for line, obj in records:
        unstorable_refuse(obj, where=f"line {line}", record=line)
        rec = record_validate(obj, line)
        if kind is None:
            kind = (rec.task_type, line)
        elif rec.task_type != kind[0]:
            raise _fail(
                line,
                "task_type",
                f"{rec.task_type!r} differs from {kind[0]!r} on "
                f"line {kind[1]}; a file holds one kind of record",
            )
        if rec.id in ids:
            raise _fail(line, "id", f"duplicate id {_show(rec.id)}, first on line {ids[rec.id]}")
        ids[rec.id] = line
        yield rec


def _batches(records: Iterator[LabeledRecord]) -> Iterator[list[LabeledRecord]]:
    batch: list[LabeledRecord] = []
    for rec in records:
        batch.append(rec)
        if len(batch) >= BATCH_SIZE:
            yield batch
            batch = []
    if batch:
        yield batch


def _raw_response(rec: LabeledRecord, response_id: str) -> dict:
    # The response's text is the trial's output; it is not stored a second time here.
    resp = {k: v for k, v in rec.responses[response_id].items() if k != "text"}
    return {
        "response": resp,
        "model": resp.get("model"),
        "dataset": rec.dataset,
        "split": rec.split,
        "source": rec.source,
    }


def _label_details(rec: LabeledRecord) -> dict:
    return {"human_label": rec.human_label, "human_annotations": rec.human_annotations}


def _critique(rec: LabeledRecord) -> str:
    critique = rec.human_label["details"].get("critique")
    return critique if isinstance(critique, str) else ""


def labeled_import(*, ctx: ImportContext, records: Iterator[tuple[int, dict]]) -> None:
    """Store a labeled-records file into ``ctx.suite``. Raises ``DomainError`` for an empty file
    or an invalid record; the caller's transaction rolls back."""
    checked = _records_checked(records)
    runs: dict[str, Any] = {}
    counts = {"trials": 0}
    graders: dict[str, dict] = {}
    kind = None
    for batch in _batches(checked):
        if kind is None:
            kind = batch[0].task_type
            if kind == POINTWISE:
                runs["R"] = ctx.run_create(name=ctx.run_name, fmt="labeled")
            else:
                runs["A"] = ctx.run_create(name=f"{ctx.run_name} / A", fmt="labeled")
                runs["B"] = ctx.run_create(name=f"{ctx.run_name} / B", fmt="labeled")
        cases = ctx.cases_upsert([r.case_spec for r in batch])
        ctx.cases_seen(cases.values())
        if kind == POINTWISE:
            _pointwise_batch(ctx, runs["R"], batch, cases, graders)
        else:
            _pairwise_batch(ctx, runs, batch, cases)
        counts["trials"] += len(batch)
    if kind is None:
        raise DomainError("the file holds no records")
    for run in runs.values():
        run_finish(run, trials=counts["trials"], graders=list(graders.values()))


def _pointwise_batch(ctx, run, batch, cases, graders) -> None:
    """Write a batch of pointwise records' trials, grades, labels and judge verdicts. Long by
    design: the steps share the ids each returns."""
    trials = [
        Trial(
            run=run,
            case=cases[r.id],
            attempt=1,
            status=Trial.Status.OK,
            output=r.responses["R"]["text"],
            raw_response=_raw_response(r, "R"),
            finished_at=run.started_at,
        )
        for r in batch
    ]
    Trial.objects.bulk_create(trials)
    labels, grades = [], []
    graders.setdefault(HUMAN_GRADER, {"key": HUMAN_GRADER, "kind": IMPORTED_KIND, "gating": True})
    for rec, trial in zip(batch, trials, strict=True):
        labels.append(
            Label(
                trial=trial,
                reviewer_name=GOLD_REVIEWER,
                verdict=rec.human_value,
                critique=_critique(rec),
                source=Label.Source.IMPORT,
                details=_label_details(rec),
            )
        )
        grades.append(
            Grade(
                trial=trial,
                grader=HUMAN_GRADER,
                grader_version="imported",
                status=Grade.Status.OK,
                passed=rec.human_value == "pass",
                reason=f"human label ({rec.human_method})",
                details={"human_label": rec.human_label},
                gating=True,
            )
        )
        for jl in rec.judges:
            version = ctx.recorded_judge_version(
                judge_model=jl.judge_model, protocol=jl.protocol, judge_type=jl.judge_type
            )
            key = version.grader_key
            graders.setdefault(
                key,
                {
                    "key": key,
                    "kind": RECORDED_JUDGE_KIND,
                    "gating": False,
                    "judge_version": str(version.uuid),
                },
            )
            details = {"score": jl.score, "rationale": jl.rationale, "raw": jl.raw}
            if jl.value is None:
                grade = Grade(
                    trial=trial,
                    grader=key,
                    grader_version=str(version.number),
                    judge_version=version,
                    status=Grade.Status.ERROR,
                    passed=None,
                    reason="unparseable",
                    details=details,
                    gating=False,
                )
            else:
                grade = Grade(
                    trial=trial,
                    grader=key,
                    grader_version=str(version.number),
                    judge_version=version,
                    status=Grade.Status.OK,
                    passed=jl.value == "pass",
                    reason=jl.rationale or f"recorded verdict: {jl.value}",
                    details=details,
                    gating=False,
                )
            grades.append(grade)
    Label.objects.bulk_create(labels)
    Grade.objects.bulk_create(grades)
    ctx.summary.trials += len(trials)
    ctx.summary.labels += len(labels)
    ctx.summary.grades += len(grades)


def _pairwise_batch(ctx, runs, batch, cases) -> None:
    trials_a = [
        Trial(
            run=runs["A"],
            case=cases[r.id],
            attempt=1,
            status=Trial.Status.OK,
            output=r.responses["A"]["text"],
            raw_response=_raw_response(r, "A"),
            finished_at=runs["A"].started_at,
        )
        for r in batch
    ]
    trials_b = [
        Trial(
            run=runs["B"],
            case=cases[r.id],
            attempt=1,
            status=Trial.Status.OK,
            output=r.responses["B"]["text"],
            raw_response=_raw_response(r, "B"),
            finished_at=runs["B"].started_at,
        )
        for r in batch
    ]
    Trial.objects.bulk_create(trials_a + trials_b)
    pairs = [
        TrialPair(case=cases[r.id], trial_a=a, trial_b=b)
        for r, a, b in zip(batch, trials_a, trials_b, strict=True)
    ]
    TrialPair.objects.bulk_create(pairs)
    labels, verdicts = [], []
    for rec, pair in zip(batch, pairs, strict=True):
        labels.append(
            PreferenceLabel(
                pair=pair,
                reviewer_name=GOLD_REVIEWER,
                preferred=rec.human_value,
                critique=_critique(rec),
                source=Label.Source.IMPORT,
                details=_label_details(rec),
            )
        )
        for jl in rec.judges:
            version = ctx.recorded_judge_version(
                judge_model=jl.judge_model, protocol=jl.protocol, judge_type=jl.judge_type
            )
            verdicts.append(
                PairwiseVerdict(
                    pair=pair,
                    judge_version=version,
                    position=jl.position,
                    status=PairwiseVerdict.Status.OK if jl.value else PairwiseVerdict.Status.ERROR,
                    preferred=jl.value or "",
                    score=jl.score,
                    reason=jl.rationale or ("unparseable" if jl.value is None else ""),
                )
            )
    PreferenceLabel.objects.bulk_create(labels)
    PairwiseVerdict.objects.bulk_create(verdicts)
    ctx.summary.trials += len(trials_a) + len(trials_b)
    ctx.summary.preference_labels += len(labels)
    ctx.summary.pairwise_verdicts += len(verdicts)

"""A run's contract decisions, read once (``run_decisions``) for every reader.

A trial's decision over its ``contract`` grades (docs/contracts.md), first match:
``infrastructure_error`` (out of every quality figure), ``rejected``, ``errored``,
``not_graded``, ``review`` (never counted as accepted), ``accepted``. Only reviews accept:
at least one review of the current output (same ``output_hash``), every such review passing
every dimension, and no label of record failing the trial. Acceptance is derived from the
labels, never stored."""

from __future__ import annotations

import dataclasses
import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from evals.models import DecisionTransition, Grade, Run, Trial

CONTRACT_KIND = "contract"
REJECTED, REVIEW, ACCEPTED = "rejected", "review", "accepted"
ERRORED, NOT_GRADED, INFRASTRUCTURE = "errored", "not_graded", "infrastructure_error"
DECISIONS = (REJECTED, REVIEW, ACCEPTED, ERRORED, NOT_GRADED, INFRASTRUCTURE)
OUTCOME_KIND = "outcome"  # a failure kind (evals.grading.contract.check.Failure)
NO_SCENARIO = "(whole output)"


@dataclass(frozen=True)
class TrialDecision:
    """One trial's decision: ``decision`` (one of ``DECISIONS``), its ``reason`` (the
    rejecting grade's, or ""), the failure ``rules`` and the ``missing_coverage``
    categories of its contract grades, whether its output ``parsed``, and ``wrong_outcome``
    (some failure is an oracle mismatch: a policy error)."""

    trial_id: int
    case_id: int
    attempt: int
    decision: str
    reason: str = ""
    rules: tuple[str, ...] = ()
    missing_coverage: tuple[str, ...] = ()
    parsed: bool | None = None
    wrong_outcome: bool = False


@dataclass(frozen=True)
class RunDecisions:
    """The decisions of a run's current trials (retried attempts left out).

    ``graded``: the run has a contract grader (else all empty); ``trials``: trial id ->
    ``TrialDecision``; ``counts``: decision -> trials; ``reasons``: ``[(reason, trials)]`` most
    frequent first; ``by_rule_scenario``: ``[(rule, scenario, failures)]`` (``NO_SCENARIO`` for a
    failure of the whole output); ``valid`` of ``attempted``: parsed outputs of ok trials with
    non-errored grades; ``usage``: decision -> ``{"trials", "latency_ms_mean" (ms or None),
    "input_tokens", "output_tokens", "tokens_unknown"}``; ``retried``: replaced attempts."""

    graded: bool
    keys: tuple[str, ...] = ()
    trials: dict[int, TrialDecision] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    reasons: list[tuple[str, int]] = field(default_factory=list)
    by_rule: dict[str, int] = field(default_factory=dict)
    by_rule_scenario: list[tuple[str, str, int]] = field(default_factory=list)
    missing_coverage: dict[str, int] = field(default_factory=dict)
    valid: int = 0
    attempted: int = 0
    infrastructure_errors: int = 0
    usage: dict[str, dict[str, Any]] = field(default_factory=dict)
    retried: int = 0

    @property
    def valid_share(self) -> float | None:
        """``valid / attempted``; None when nothing was attempted (unknown is not zero)."""
        return self.valid / self.attempted if self.attempted else None

    @property
    def wrong_outcome_rejects(self) -> int:
        """Rejected trials with at least one oracle mismatch (an ``outcome`` failure): a
        policy error, not a malformed output."""
        return sum(1 for t in self.trials.values() if t.decision == REJECTED and t.wrong_outcome)

    def as_json(self) -> dict[str, Any]:
        """The strict-JSON form (``run_report --json``'s ``decisions``)."""
        return {
            "graders": list(self.keys),
            "counts": dict(self.counts),
            "reasons": [{"reason": r, "trials": n} for r, n in self.reasons],
            "by_rule": dict(self.by_rule),
            "by_rule_scenario": [
                {"rule": r, "scenario": s, "failures": n} for r, s, n in self.by_rule_scenario
            ],
            "missing_coverage": dict(self.missing_coverage),
            "valid": self.valid,
            "attempted": self.attempted,
            "valid_share": self.valid_share,
            "infrastructure_errors": self.infrastructure_errors,
            "wrong_outcome_rejects": self.wrong_outcome_rejects,
            "usage": {d: dict(u) for d, u in self.usage.items()},
            "retried": self.retried,
        }


def output_hash(text: str) -> str:
    """The content hash a review is tied to: SHA-256 hex of the output's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def review_passed(review: object, *, current_hash: str) -> bool | None:
    """One review (a label's ``details.contract_review``) of the output whose hash is
    ``current_hash``: True when it passed every dimension, False when it failed one, None
    when it reviewed another output (or is malformed)."""
    if not isinstance(review, dict) or review.get("output_hash") != current_hash:
        return None
    dimensions = review.get("dimensions")
    if not isinstance(dimensions, dict) or not dimensions:
        return None
    return all(isinstance(d, dict) and d.get("verdict") == "pass" for d in dimensions.values())


def _accepted_ids(review_ids: list[int]) -> set[int]:
    """Of the ``review`` trials, those their labels of record accept (module doc)."""
    if not review_ids:
        return set()
    verdicts: dict[int, list[bool]] = {}
    outputs: dict[int, str] = {}
    for trial_id, output, verdict, details in Trial.objects.filter(
        id__in=review_ids, labels__isnull=False
    ).values_list("id", "output", "labels__verdict", "labels__details"):
        if trial_id not in outputs:
            outputs[trial_id] = output_hash(output)
        passed = review_passed(
            (details or {}).get("contract_review"), current_hash=outputs[trial_id]
        )
        if verdict != "pass":
            passed = False
        if passed is not None:
            verdicts.setdefault(trial_id, []).append(passed)
    return {t for t, v in verdicts.items() if v and all(v)}


def _decide(grades: list[tuple], n_keys: int) -> str:
    statuses = [(status, details.get("decision")) for status, _, details in grades]
    if any(status == Grade.Status.OK and d == "reject" for status, d in statuses):
        return REJECTED
    if any(status != Grade.Status.OK for status, _ in statuses):
        return ERRORED
    if len(grades) < n_keys:
        return NOT_GRADED
    return REVIEW


def trial_decision_get(*, trial_id: int) -> str | None:
    """The current decision of one trial (one of ``DECISIONS``), derived as in
    ``run_decisions`` from its contract grades and its labels of record; None when its run
    has no contract grader or the trial has not finished. Three queries at most."""
    trial = Trial.objects.select_related("run").defer("output").get(pk=trial_id)
    keys = tuple(s.key for s in trial.run.grader_set.specs if s.kind == CONTRACT_KIND)
    if not keys or trial.status not in Trial.FINISHED:
        return None
    if trial.status != Trial.Status.OK:
        return INFRASTRUCTURE
    grades = [
        (status, reason, details or {})
        for status, reason, details in Grade.objects.filter(
            trial_id=trial_id, grader__in=keys
        ).values_list("status", "reason", "details")
    ]
    decision = _decide(grades, len(keys))
    if decision == REVIEW and _accepted_ids([trial_id]):
        return ACCEPTED
    return decision


def decision_history(*, trial_ids: list[int]) -> dict[int, list[DecisionTransition]]:
    """Decision transitions by trial id for ``trial_ids``, oldest first. One query."""
    out: dict[int, list[DecisionTransition]] = {}
    for t in DecisionTransition.objects.filter(trial_id__in=trial_ids).order_by(
        "trial_id", "created_at", "id"
    ):
        out.setdefault(t.trial_id, []).append(t)
    return out


def run_decisions(*, run: Run) -> RunDecisions:
    """``run``'s contract decisions: four queries, none without a contract grader. Long: one pass
    over the trials fills every count, group and usage figure of ``RunDecisions``."""
    keys = tuple(s.key for s in run.grader_set.specs if s.kind == CONTRACT_KIND)
    if not keys:
        return RunDecisions(graded=False)
    trials = list(
        Trial.objects.filter(run=run, replaced_by__isnull=True, status__in=Trial.FINISHED)
        .order_by("case_id", "attempt")
        .values_list(
            "id", "case_id", "attempt", "status", "latency_ms", "input_tokens", "output_tokens"
        )
    )
    by_trial: dict[int, list[tuple]] = {}
    for trial_id, status, reason, details in (
        Grade.objects.filter(trial__run=run, grader__in=keys, trial__replaced_by__isnull=True)
        .order_by("trial_id", "grader")
        .values_list("trial_id", "status", "reason", "details")
    ):
        by_trial.setdefault(trial_id, []).append((status, reason, details or {}))
    out: dict[int, TrialDecision] = {}
    counts: Counter[str] = Counter()
    reasons: Counter[str] = Counter()
    by_rule: Counter[str] = Counter()
    by_rule_scenario: Counter[tuple[str, str]] = Counter()
    missing: Counter[str] = Counter()
    valid = attempted = 0
    spent: dict[int, tuple] = {}
    for trial_id, case_id, attempt, status, latency, tokens_in, tokens_out in trials:
        if status != Trial.Status.OK:
            decision = INFRASTRUCTURE
            out[trial_id] = TrialDecision(trial_id, case_id, attempt, decision)
            spent[trial_id] = (latency, tokens_in, tokens_out)
            continue
        grades = by_trial.get(trial_id, [])
        decision = _decide(grades, len(keys))
        rules: list[str] = []
        gaps: list[str] = []
        parsed_flags = []
        reason = ""
        wrong_outcome = False
        for g_status, g_reason, details in grades:
            if g_status != Grade.Status.OK:
                continue
            parsed_flags.append(details.get("parsed") is not False)
            if details.get("decision") == "reject" and not reason:
                reason = g_reason
            for failure in details.get("failures") or []:
                rule = str(failure.get("rule"))
                wrong_outcome = wrong_outcome or failure.get("kind") == OUTCOME_KIND
                if rule not in rules:
                    rules.append(rule)
                for scenario in failure.get("categories") or [NO_SCENARIO]:
                    if rule == "missing_coverage":
                        continue
                    by_rule_scenario[(rule, str(scenario))] += 1
            for category in details.get("missing_coverage") or []:
                if category not in gaps:
                    gaps.append(str(category))
        parsed = all(parsed_flags) if parsed_flags else None
        if decision in (REJECTED, REVIEW):  # accepted ones come from review
            attempted += 1
            valid += bool(parsed)
        if decision == REJECTED:
            reasons[reason] += 1
            by_rule.update(rules)
            missing.update(gaps)
            for category in gaps:
                by_rule_scenario[("missing_coverage", category)] += 1
        spent[trial_id] = (latency, tokens_in, tokens_out)
        out[trial_id] = TrialDecision(
            trial_id,
            case_id,
            attempt,
            decision,
            reason,
            tuple(rules),
            tuple(gaps),
            parsed,
            wrong_outcome,
        )
    for trial_id in _accepted_ids([t for t, d in out.items() if d.decision == REVIEW]):
        out[trial_id] = dataclasses.replace(out[trial_id], decision=ACCEPTED)
    usage: dict[str, dict[str, Any]] = {}
    for trial_id, d in out.items():
        counts[d.decision] += 1
        _usage_add(usage, d.decision, *spent[trial_id])
    return RunDecisions(
        graded=True,
        keys=keys,
        trials=out,
        counts={d: counts.get(d, 0) for d in DECISIONS},
        reasons=sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])),
        by_rule=dict(sorted(by_rule.items(), key=lambda kv: (-kv[1], kv[0]))),
        by_rule_scenario=sorted(
            ((r, s, n) for (r, s), n in by_rule_scenario.items()),
            key=lambda t: (-t[2], t[0], t[1]),
        ),
        missing_coverage=dict(sorted(missing.items(), key=lambda kv: (-kv[1], kv[0]))),
        valid=valid,
        attempted=attempted,
        infrastructure_errors=counts.get(INFRASTRUCTURE, 0),
        usage={d: _usage_final(usage[d]) for d in DECISIONS if d in usage},
        retried=Trial.objects.filter(run=run, replaced_by__isnull=False).count(),
    )


def _usage_add(usage: dict, decision: str, latency, tokens_in, tokens_out) -> None:
    u = usage.setdefault(
        decision,
        {"trials": 0, "latency": [], "input_tokens": 0, "output_tokens": 0, "tokens_unknown": 0},
    )
    u["trials"] += 1
    if latency is not None:
        u["latency"].append(latency)
    if tokens_in is None or tokens_out is None:
        u["tokens_unknown"] += 1
    u["input_tokens"] += tokens_in or 0
    u["output_tokens"] += tokens_out or 0


def _usage_final(u: dict) -> dict[str, Any]:
    latency = u.pop("latency")
    return {**u, "latency_ms_mean": sum(latency) / len(latency) if latency else None}

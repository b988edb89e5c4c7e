"""Trials, read-only: the list (rows, not models) and the detail."""

from __future__ import annotations

import functools
from typing import Any

from django.conf import settings
from django.db.models.functions import Length, Substr
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers

from core.api.rows import field_converter
from evals.api.runs._common import (
    P_CASE,
    P_RUN,
    P_SUITE,
    P_TAG,
    H,
    ViewerViewSet,
    _by_status,
    _by_uuid,
    _detail,
    _help,
    _status,
    _tag,
)
from evals.blindness import NOT_BLIND, Blind, blind_for
from evals.grading.contract.decisions import CONTRACT_KIND, decision_history, run_decisions
from evals.models import Run, Trial
from evals.tags import trials_tagged

TRIAL_FIELDS = [
    "uuid",
    "run",
    "case",
    "attempt",
    "status",
    "error_message",
    "latency_ms",
    "input_tokens",
    "output_tokens",
    "cache_write_tokens",
    "cache_read_tokens",
    "reasoning_tokens",
    "cost_usd",
    "cost_basis",
    "created_at",
]
TRIAL_HELP = _help(
    TRIAL_FIELDS,
    attempt="Attempt number 1..N.",
    status="queued, running, ok, error or cancelled.",
    error_message="Why the trial errored.",
    latency_ms="Wall-clock latency of the target call (ms).",
    input_tokens="Prompt tokens billed at the input rate: neither written to nor read from a "
    "cache (null: unknown; docs/costs.md).",
    output_tokens="Completion tokens that are not reasoning (null: unknown).",
    cache_write_tokens="Prompt tokens written to a cache (Anthropic; null: not reported).",
    cache_read_tokens="Prompt tokens read from a cache (null: not reported).",
    reasoning_tokens="Reasoning tokens (OpenAI o-series; null: not reported).",
    cost_usd="Cost in USD (string, exact; null: unknown, cost_basis says why).",
    cost_basis="What the cost rests on: {model, price, source, classes} (the token classes "
    "priced), {model, price, source, unknown: [reason]} when unknown, {source: 'target'} for "
    "the target's own account; null when not priced by Assay (errored, imported).",
)


class TrialSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(source="run.uuid", read_only=True, help_text=H["run"])
    case = serializers.UUIDField(source="case.uuid", read_only=True, help_text=H["case"])
    output_preview = serializers.CharField(
        read_only=True, help_text="First 2,000 characters of the output."
    )
    output_length = serializers.IntegerField(
        read_only=True, help_text="Length of the whole output (characters)."
    )
    decision = serializers.SerializerMethodField(
        help_text="The contract decision of the trial: rejected, review (every deterministic "
        "check passed; not accepted), accepted, errored, not_graded or infrastructure_error; "
        "null when its run has no contract grader or the attempt was retried, and for a "
        "reviewer while its case shares its input with an item they still have to label."
    )

    class Meta:
        model = Trial
        fields = [*TRIAL_FIELDS, "output_preview", "output_length", "decision"]
        extra_kwargs = TRIAL_HELP

    def get_decision(self, trial: Trial) -> str | None:
        if "blind" not in self.context:
            request = self.context.get("request")
            self.context["blind"] = blind_for(request.user) if request else NOT_BLIND
        if self.context["blind"].holds(trial.case):
            return None  # a decision is a verdict (evals.blindness)
        # One read of the run's decisions per run per response (the serializer context).
        cache = self.context.setdefault("run_decisions", {})
        if trial.run_id not in cache:
            cache[trial.run_id] = run_decisions(run=trial.run)
        found = cache[trial.run_id].trials.get(trial.id)
        return found.decision if found else None


# Where a list row keeps each field of ``TrialSerializer`` (by default under its own name).
TRIAL_ROW_KEYS: dict[str, str | None] = {"run": "run__uuid", "case": "case__uuid", "decision": None}
TRIAL_LIST_COLUMNS = (
    "id",
    "run_id",
    "run__uuid",
    "case__uuid",
    *(f for f in TRIAL_FIELDS if f not in TRIAL_ROW_KEYS),
    "output_preview",
    "output_length",
    "case__input_hash",  # blindness (evals.blindness): a blind trial shows no decision
)


@functools.cache
def _trial_list_fields() -> tuple[serializers.Field, ...]:
    """``TrialSerializer``'s readable fields, built once per process (DRF rebuilds them per use)."""
    return tuple(TrialSerializer()._readable_fields)


def trial_rows_data(
    rows: list[dict], *, runs: dict[int, Run], blind: Blind = NOT_BLIND
) -> list[dict]:
    """The JSON of a list page's trials: rows of ``TRIAL_LIST_COLUMNS`` through
    ``TrialSerializer``'s fields' representations (``core.api.rows``; DRF's per-attribute path
    was half the page's time), each with its run's contract decision, None when blind for the
    reader. A test holds every row equal to ``TrialSerializer``'s."""
    plan = []  # (name, converter, row key; None: the decision), in field order
    for f in _trial_list_fields():
        field_name = f.field_name
        assert field_name is not None  # a serializer's fields are bound, hence named
        key = TRIAL_ROW_KEYS.get(field_name, field_name)
        plan.append((field_name, None if key is None else field_converter(f), key))
    decisions: dict[int, dict] = {}
    out = []
    for row in rows:
        item: dict[str, Any] = {}
        for name, convert, key in plan:
            if key is None:
                if row["case__input_hash"] in blind.groups:
                    item[name] = None
                    continue
                run_id = row["run_id"]
                if run_id not in decisions:
                    decisions[run_id] = run_decisions(run=runs[run_id]).trials
                found = decisions[run_id].get(row["id"])
                item[name] = found.decision if found else None
                continue
            assert convert is not None  # built for every field with a row key
            value = row[key]
            item[name] = None if value is None else convert(value)
        out.append(item)
    return out


class TrialDetailSerializer(TrialSerializer):
    decision_history = serializers.SerializerMethodField(
        help_text="The moves of the contract decision caused by label changes, oldest first: "
        "{from, to, reviewer, label_version, cause (created, revised, undo), at}; empty when "
        "none (and for a reviewer while the decision is hidden from them)."
    )
    goal_state = serializers.JSONField(
        source="case.goal_state",
        read_only=True,
        help_text="The case's goal state (an agent case's wanted final state; null for none).",
    )

    class Meta(TrialSerializer.Meta):
        fields = [
            *TRIAL_FIELDS,
            "output",
            "output_length",
            "decision",
            "decision_history",
            "request",
            "trajectory",
            "final_state",
            "goal_state",
        ]
        extra_kwargs = {
            **TRIAL_HELP,
            "output": {"help_text": "The whole output (text)."},
            "trajectory": {
                "help_text": "An agent trial's ordered steps (message, tool_call, tool_result; "
                "tokens, latency_ms and cost_usd per step where known; docs/agents.md); "
                "null for a trial that has none."
            },
            "final_state": {
                "help_text": "The world's state when the agent stopped (any JSON); null when none."
            },
            "request": {
                "help_text": "The exact request the target sent (an OpenAI-compatible target: "
                "the JSON body with model, messages as rendered and generation settings); "
                "null when the target sent none of its own."
            },
        }

    def get_decision_history(self, trial: Trial) -> list[dict]:
        if self.get_decision(trial) is None:
            return []
        return [
            {
                "from": t.from_decision,
                "to": t.to_decision,
                "reviewer": t.reviewer_name,
                "label_version": t.label_version,
                "cause": t.cause,
                "at": t.created_at.isoformat(),
            }
            for t in decision_history(trial_ids=[trial.id]).get(trial.id, [])
        ]


@extend_schema_view(
    list=extend_schema(parameters=[P_RUN, P_CASE, P_SUITE, P_TAG, _status(Trial.Status)]),
    **_detail("trial"),
)
class TrialViewSet(ViewerViewSet):
    """Trials; ``?run=<uuid>``, ``?case=<uuid>``, ``?suite=<uuid>``, ``?tag=`` (the case's
    tag), ``?status=``. Lists hold an output preview (first 2,000 characters, cut in the
    database) and the full length; the detail holds the output. No grade or label is
    included (they are ``/api/grades/`` and ``/api/labels/``, filtered by
    ``evals.blindness``), so a reviewer reads no verdict here. The detail also holds an agent
    trial's ``trajectory``, ``final_state`` and its case's ``goal_state`` (lists do not load
    them)."""

    def get_queryset(self):
        if self.action == "list":
            qs = Trial.objects.annotate(
                output_preview=Substr("output", 1, settings.ASSAY["OUTPUT_PREVIEW_CHARS"]),
                output_length=Length("output"),
            )
        else:
            qs = Trial.objects.select_related("run", "case").annotate(
                output_length=Length("output")
            )
        qs = _by_uuid(
            self.request, qs, run="run__uuid", case="case__uuid", suite="run__suite__uuid"
        )
        tag = _tag(self.request)
        if tag is not None:
            qs = trials_tagged(qs, tag)
        qs = _by_status(self.request, qs, Trial.Status)
        # A list reads rows, not models: the listed columns only, no run or case row.
        return qs.values(*TRIAL_LIST_COLUMNS) if self.action == "list" else qs

    def list(self, request, *args, **kwargs):
        """A page of trials: three queries whatever the number of trials (the user with
        their roles, by token or session; the page; its runs), plus the contract decisions
        of a run that has a contract grader (and then the reader's blind groups)."""
        page = self.paginate_queryset(self.get_queryset())
        runs = Run.objects.only("id", "graders").in_bulk({row["run_id"] for row in page})
        contract = any(
            s.kind == CONTRACT_KIND for run in runs.values() for s in run.grader_set.specs
        )
        blind = blind_for(request.user) if contract else NOT_BLIND  # only decisions are hidden
        return self.get_paginated_response(trial_rows_data(page, runs=runs, blind=blind))

    def get_serializer_class(self):
        return TrialDetailSerializer if self.action == "retrieve" else TrialSerializer

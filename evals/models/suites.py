"""Suites and their cases: what is asked, each change to a suite's golden set, and the
cases graduated from a capability suite into a regression suite.

A case is frozen: its content (input, expected, context documents, goal state) is hashed
(``content_hash``); a change makes a new case and retires the old one, so runs weeks apart
compare the same thing.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


def content_hash(*, input: Any, expected: Any, context: Any, goal_state: Any = None) -> str:
    """SHA-256 (hex, 64 chars) of a case's content in canonical JSON (sorted keys, no spaces);
    ``goal_state`` counts only when set, so cases without one keep their hash."""
    content = {"input": input, "expected": expected, "context": context}
    if goal_state is not None:
        content["goal_state"] = goal_state
    payload = json.dumps(
        content,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def input_hash(*, input: Any, context: Any) -> str:
    """SHA-256 (hex, 64 chars) of what a case asks (input and context, in canonical JSON): the key
    of its group for blind reviewing (``evals.blindness``)."""
    payload = json.dumps(
        {"input": input, "context": context},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class Suite(models.Model):
    """A frozen collection of cases run as a unit."""

    class Kind(models.TextChoices):
        CAPABILITY = "capability", "capability"
        REGRESSION = "regression", "regression"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    kind = models.CharField(max_length=20, choices=Kind.choices, default=Kind.REGRESSION)
    trust_thresholds = models.JSONField(
        default=dict,
        blank=True,
        help_text='Judge trust thresholds for this suite, overriding settings ASSAY["TRUST"]: '
        '{"MIN_N": 30, "MIN_KAPPA": 0.6, "MAX_FAR": 0.10} (any subset; '
        "labeling.selectors.trust_thresholds).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class CaseQuerySet(models.QuerySet):
    def active(self) -> CaseQuerySet:
        return self.filter(retired_at__isnull=True)


class Case(models.Model):
    """One input of a suite. ``input``: a string or a JSON object; ``expected``: any JSON or null;
    ``context``: ``[{"id": str, "text": str}]``; ``tags``: strings; ``goal_state``: an agent
    case's wanted final state (JSON or null)."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="cases")
    key = models.CharField(max_length=200)
    input = models.JSONField()
    expected = models.JSONField(null=True, blank=True)
    context = models.JSONField(default=list, blank=True)
    tags = models.JSONField(default=list, blank=True)
    goal_state = models.JSONField(null=True, blank=True)
    content_hash = models.CharField(max_length=64, db_index=True, editable=False)
    # The case's group (``input_hash``): every case with the same input and context.
    input_hash = models.CharField(max_length=64, db_index=True, editable=False, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    replaced_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replaces"
    )

    objects = CaseQuerySet.as_manager()

    class Meta:
        ordering = ["suite_id", "key", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "key"],
                condition=Q(retired_at__isnull=True),
                name="case_unique_active_key_per_suite",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.suite_id}:{self.key}"

    def save(self, *args, **kwargs):
        self.content_hash = content_hash(
            input=self.input,
            expected=self.expected,
            context=self.context,
            goal_state=self.goal_state,
        )
        self.input_hash = input_hash(input=self.input, context=self.context)
        super().save(*args, **kwargs)

    @property
    def input_text(self) -> str:
        """The input as display text: strings as they are, JSON objects pretty-printed."""
        if isinstance(self.input, str):
            return self.input
        return json.dumps(self.input, indent=2, ensure_ascii=False)


class CaseChange(models.Model):
    """One change to a suite's golden set, with who and when; rows are only ever added (written by
    ``evals.cases.cases_upsert`` and ``evals.case_changes``).

    ``action``: ``created``, ``replaced`` (``previous`` retired), ``retagged`` (in place) or
    ``retired``; ``via``: the path (editor, api, import, config, ...); ``details``:
    ``{"tags": [old, new]}`` or ``{"key": [old, new]}``."""

    class Action(models.TextChoices):
        CREATED = "created", "created"
        REPLACED = "replaced", "replaced"
        RETAGGED = "retagged", "retagged"
        RETIRED = "retired", "retired"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="case_changes")
    case = models.ForeignKey(Case, on_delete=models.CASCADE, related_name="changes")
    previous = models.ForeignKey(
        Case, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes_as_previous"
    )
    action = models.CharField(max_length=20, choices=Action.choices)
    via = models.CharField(max_length=40, blank=True)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now, db_index=True)
    source_trial = models.ForeignKey(
        "Trial", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["suite", "-at"], name="casechange_suite_at")]

    def __str__(self) -> str:
        return f"{self.action} {self.case_id}"


class Graduation(models.Model):
    """A capability case copied into a regression suite after passing its last runs; who, when."""

    case = models.ForeignKey(Case, on_delete=models.PROTECT, related_name="graduations")
    regression_case = models.ForeignKey(
        Case, on_delete=models.PROTECT, related_name="graduated_from"
    )
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    at = models.DateTimeField(default=timezone.now)
    evidence = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.case_id} -> {self.regression_case_id}"

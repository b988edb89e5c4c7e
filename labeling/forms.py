"""Forms for the labeling pages: parse and validate at the edge, hand typed values to
the concept modules (``labeling.labels``, ...)."""

from __future__ import annotations

from typing import cast

from django import forms
from django.contrib.auth import get_user_model

from core.bounds import INT_MAX, SEED_MAX
from core.forms import StorableForm
from core.roles import REVIEWER
from evals.models import Run
from judges.models import JudgeVersion
from labeling.labels import CRITIQUE_MAX
from labeling.models import CalibrationSet, Label, PreferenceLabel


class CalibrationSetBuildForm(StorableForm):
    """Build a calibration set: name, run, judge version (optional), size (1..1000, default 30),
    seed.
    """

    name = forms.CharField(max_length=200)
    run = forms.ModelChoiceField(
        queryset=Run.objects.select_related("suite").order_by("-created_at"),
        to_field_name="uuid",
        help_text="the run whose trials are sampled",
    )
    judge_version = forms.ModelChoiceField(
        queryset=JudgeVersion.objects.select_related("judge"),
        to_field_name="uuid",
        required=False,
        help_text="plan the set for this judge's false-accept rate: only trials it judged, "
        "likely human fails first, sampling weights recorded",
    )
    size = forms.IntegerField(min_value=1, max_value=1000, initial=30)
    seed = forms.IntegerField(
        initial=0,
        min_value=0,
        max_value=SEED_MAX,
        help_text="the same seed picks the same trials",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["run"].label_from_instance = lambda r: f"{r.suite.name} / {r.name}"


class CalibrationItemForm(StorableForm):
    """Add or remove one trial (by uuid) of a calibration set."""

    trial = forms.UUIDField(help_text="the trial's uuid (from its trial page)")


class LabelForm(StorableForm):
    """A label from the queue: trial, pass/fail, critique and the version loaded (0: none)."""

    trial = forms.UUIDField(widget=forms.HiddenInput)
    verdict = forms.ChoiceField(
        choices=Label.Verdict.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose pass (p) or fail (f)."},
    )
    critique = forms.CharField(
        required=False, max_length=CRITIQUE_MAX, widget=forms.Textarea(attrs={"rows": 4})
    )
    expected_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)


class PreferenceLabelForm(StorableForm):
    """A preference on one pair: the pair id, A, B or tie, an optional critique, the version."""

    pair = forms.IntegerField(min_value=1, max_value=INT_MAX, widget=forms.HiddenInput)
    verdict = forms.ChoiceField(
        choices=PreferenceLabel.Preferred.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose A, B or tie."},
    )
    critique = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    # The version of the reviewer's preference the page showed (0: none); required, so a post
    # without it cannot skip the compare-and-set.
    expected_version = forms.IntegerField(
        min_value=0,
        max_value=INT_MAX,
        widget=forms.HiddenInput,
        error_messages=dict.fromkeys(
            ("required", "invalid", "min_value", "max_value"),
            "expected_version: missing or not a version of your preference; reload the "
            "page — nothing was saved",
        ),
    )


class ReviewForm(StorableForm):
    """A review: the trial, the output hash shown, and per dimension ``verdict-<name>`` and
    ``critique-<name>``. ``review_submit`` checks the answers; this form refuses only what
    cannot be stored.
    """

    trial = forms.UUIDField(widget=forms.HiddenInput)
    output_hash = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, dimensions: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.dimensions = list(dimensions)
        for name in self.dimensions:
            self.fields[f"verdict-{name}"] = forms.CharField(required=False)
            self.fields[f"critique-{name}"] = forms.CharField(required=False)

    def dimension_rows(self) -> list[tuple[str, forms.BoundField, forms.BoundField]]:
        """``(name, verdict, critique)`` per dimension, in the queue's order, for the page."""
        return [(d, self[f"verdict-{d}"], self[f"critique-{d}"]) for d in self.dimensions]

    def answers(self) -> dict[str, dict[str, str]]:
        """``{name: {"verdict", "critique"}}`` as ``review_submit`` takes them; valid forms only."""
        data = self.cleaned_data
        return {
            d: {"verdict": data[f"verdict-{d}"], "critique": data[f"critique-{d}"]}
            for d in self.dimensions
        }


class TrustRevokeForm(StorableForm):
    """Revoke trust: the approval's UUID the page showed (a newer one is never revoked unseen)
    and the reason.
    """

    approval = forms.UUIDField(
        widget=forms.HiddenInput,
        error_messages={"required": "The form named no approval; reload the page."},
    )

    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give a reason for revoking trust."},
    )


class TrustApproveForm(StorableForm):
    """Mark trusted: the scope (a set's uuid, or empty) and the counts the lead saw."""

    calibration_set = forms.UUIDField(required=False, widget=forms.HiddenInput)
    n = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    judge_pass_human_pass = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    judge_pass_human_fail = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    judge_fail_human_pass = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    judge_fail_human_fail = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    n_judge_errors = forms.IntegerField(min_value=0, widget=forms.HiddenInput)


class PairwiseTrustApproveForm(StorableForm):
    """Mark a pairwise judge trusted: the scope (a suite's uuid, or empty) and the counts seen."""

    suite = forms.UUIDField(required=False, widget=forms.HiddenInput)
    n = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    agreement_numerator = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    n_inconsistent = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    n_judge_errors = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    n_unresolved = forms.IntegerField(min_value=0, widget=forms.HiddenInput)


class AdjudicationForm(StorableForm):
    """A lead's decision: trial, pass/fail, reason (required) and the decision version the page
    showed (0: none).
    """

    trial = forms.UUIDField(widget=forms.HiddenInput)
    expected_version = forms.IntegerField(min_value=0, widget=forms.HiddenInput)
    verdict = forms.ChoiceField(
        choices=Label.Verdict.choices,
        widget=forms.RadioSelect,
        error_messages={"required": "Choose pass or fail."},
    )
    reason = forms.CharField(
        max_length=CRITIQUE_MAX,
        widget=forms.Textarea(attrs={"rows": 2}),
        error_messages={"required": "Give the reason for the decision."},
    )


class CalibrationInstructionsForm(StorableForm):
    """A set's guidelines for reviewers (Markdown; raw HTML shown as text)."""

    instructions = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 10, "class": "instructions-input"}),
        help_text="Markdown: the criterion, what counts as a pass or a fail, examples. "
        "Raw HTML is shown as text.",
    )
    # The guidelines version the form was loaded with (a stale tab is refused); required, so
    # a post without it cannot skip the check (0: no guidelines yet).
    expected_version = forms.IntegerField(
        required=True,
        min_value=0,
        max_value=INT_MAX,
        widget=forms.HiddenInput,
        error_messages=dict.fromkeys(
            ("required", "invalid", "min_value", "max_value"),
            "Guidelines not saved: expected_version: missing or not a guidelines "
            "version; reload the page to edit the current guidelines — nothing was saved",
        ),
    )


class JudgeImproveForm(StorableForm):
    """The improve page: chosen examples (each value one trial's comma-separated label ids), the
    prompt template, and ``preview`` or ``create``.
    """

    examples = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    prompt_template = forms.CharField(widget=forms.Textarea(attrs={"rows": 16, "cols": 100}))
    action = forms.ChoiceField(choices=[("preview", "preview"), ("create", "create")])

    def __init__(self, *args, choices: list[tuple[str, str]], **kwargs):
        super().__init__(*args, **kwargs)
        examples = self.fields["examples"]
        assert isinstance(examples, forms.MultipleChoiceField)  # declared above
        examples.choices = choices

    def label_ids(self) -> list[int]:
        """The label ids of every chosen example."""
        return [int(x) for value in self.cleaned_data["examples"] for x in value.split(",") if x]


def _reviewers():
    return get_user_model().objects.filter(groups__name=REVIEWER).order_by("username").distinct()


class _UserChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.get_username()


class _UserChoice(forms.ModelChoiceField):
    def label_from_instance(self, obj) -> str:
        return obj.get_username()


class AssignmentForm(StorableForm):
    """Reviewers (users with the role reviewer), overlap k, seed."""

    reviewers = _UserChoices(queryset=_reviewers(), widget=forms.CheckboxSelectMultiple)
    overlap = forms.IntegerField(min_value=1, initial=2, help_text="distinct reviewers per item")
    seed = forms.IntegerField(min_value=0, max_value=SEED_MAX, initial=0)


class ReassignForm(StorableForm):
    """The reviewer who leaves; who takes their unlabeled items (none chosen: the others)."""

    from_reviewer = _UserChoice(queryset=_reviewers())
    to_reviewers = _UserChoices(
        queryset=_reviewers(), required=False, widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args, calibration_set: CalibrationSet | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if calibration_set is not None:
            field = cast(forms.ModelChoiceField, self.fields["from_reviewer"])
            field.queryset = (
                get_user_model()
                .objects.filter(pk__in=calibration_set.assignment.reviewers.values("pk"))
                .order_by("username")
            )

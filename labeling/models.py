"""Human labels, preferences, calibration sets, adjudications and their histories; a label
without a user names its source in ``reviewer_name``. Rules: the concept modules.
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone


class Label(models.Model):
    """A reviewer's pass/fail verdict and critique on one trial."""

    class Verdict(models.TextChoices):
        PASS = "pass", "pass"
        FAIL = "fail", "fail"

    class Source(models.TextChoices):
        REVIEWER = "reviewer", "reviewer in Assay"
        IMPORT = "import", "imported"

    trial = models.ForeignKey("evals.Trial", on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="labels",
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    verdict = models.CharField(max_length=4, choices=Verdict.choices)
    critique = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.REVIEWER)
    details = models.JSONField(default=dict, blank=True)
    # 1 for a first label, +1 per change (undo included; never reused): a form carries it
    # back as ``expected_version``.
    version = models.PositiveIntegerField(default=1)
    guidelines = models.ForeignKey(
        "GuidelinesVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="labels",
        help_text="the version of the set's guidelines this verdict was given under (null: "
        "no guidelines, or a label from outside a set's queue)",
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    # Not stored: what ``label_submit`` did ("created", "revised", "flagged", "unchanged")
    # and, for a frozen label, the revision holding the change; set on the label it returns.
    outcome: str
    flagged_revision: LabelRevision | None

    class Meta:
        ordering = ["trial_id", "created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["trial", "reviewer"],
                condition=Q(reviewer__isnull=False),
                name="label_one_current_per_trial_reviewer",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} on {self.trial_id}"


class LabelRevision(models.Model):
    """One change to a reviewer's label; never edited. Keyed by (trial, reviewer), so versions
    outlive a cleared label. ``verdict`` "": a clearing; ``undoes``: the version taken back;
    ``after_reveal``: flagged (``labeling.freeze``); ``details``: restored by an undo.
    """

    label = models.ForeignKey(
        Label, null=True, blank=True, on_delete=models.SET_NULL, related_name="revisions"
    )
    trial = models.ForeignKey(
        "evals.Trial", on_delete=models.CASCADE, related_name="label_revisions"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="label_revisions"
    )
    version = models.PositiveIntegerField()
    verdict = models.CharField(max_length=4, choices=Label.Verdict.choices, blank=True)
    critique = models.TextField(blank=True)
    undoes = models.PositiveIntegerField(
        null=True, blank=True, help_text="the version this undo took back (null: a save)"
    )
    after_reveal = models.BooleanField(
        default=False,
        help_text="saved after the reviewer saw the judge's verdicts (finished the set): "
        "flagged, not the label of record",
    )
    guidelines = models.ForeignKey(
        "GuidelinesVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="label_revisions",
        help_text="the guidelines version this revision was given under",
    )
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["trial_id", "reviewer_id", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["trial", "reviewer", "version"], name="label_revision_unique_version"
            ),
        ]

    def __str__(self) -> str:
        state = self.verdict or "cleared"
        return f"{state} (v{self.version}) on trial {self.trial_id} by {self.reviewer_id}"

    @property
    def is_cleared(self) -> bool:
        return self.verdict == ""


class CalibrationSet(models.Model):
    """Trials of one run picked for calibration; frozen (``frozen_at``) at the first label."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    name = models.CharField(max_length=200)
    suite = models.ForeignKey(
        "evals.Suite", on_delete=models.CASCADE, related_name="calibration_sets"
    )
    run = models.ForeignKey("evals.Run", on_delete=models.PROTECT, related_name="calibration_sets")
    judge_version = models.ForeignKey(
        "judges.JudgeVersion",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="calibration_sets",
        help_text="the judge whose verdicts stratified it",
    )
    size = models.PositiveIntegerField()
    seed = models.BigIntegerField(default=0)  # 0 .. 2**63 - 1 (core.bounds.SEED_MAX)
    # Labeling guidelines for reviewers, in Markdown (rendered with raw HTML disabled:
    # ``core.markdown``); shown in the queue with each item and behind its "?" key. The
    # current text of ``GuidelinesVersion`` number ``instructions_version`` (0: never
    # written), changed only by ``calibration_set_instructions_set`` (a compare-and-set).
    instructions = models.TextField(blank=True)
    instructions_version = models.PositiveIntegerField(default=0)
    design = models.JSONField(
        default=dict,
        blank=True,
        help_text="the sampling design of a planned set (labeling.sampling): strata with "
        "their population, judge verdict and prior fail probability; empty for a hand-made set",
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    frozen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_frozen(self) -> bool:
        return self.frozen_at is not None


class CalibrationItem(models.Model):
    """One trial of a calibration set at ``position`` (0-based queue order); a planned set's
    items hold their ``stratum`` and ``inclusion_probability``.
    """

    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.CASCADE, related_name="items"
    )
    trial = models.ForeignKey(
        "evals.Trial", on_delete=models.CASCADE, related_name="calibration_items"
    )
    position = models.PositiveIntegerField()
    stratum = models.CharField(max_length=100, blank=True)
    inclusion_probability = models.FloatField(
        null=True,
        blank=True,
        help_text="probability that the planned draw included this trial (its weight is "
        "1 / it); null for an item added by hand (no known design)",
    )

    class Meta:
        ordering = ["calibration_set_id", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["calibration_set", "trial"], name="calibration_item_unique_trial"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.calibration_set_id}#{self.position}"


class Adjudication(models.Model):
    """A lead's decision on a trial where humans disagree; the highest ``version`` is the
    trial's reference label. Never edited: a change is a new row at the next version.
    """

    trial = models.ForeignKey("evals.Trial", on_delete=models.CASCADE, related_name="adjudications")
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="adjudications"
    )
    verdict = models.CharField(max_length=4, choices=Label.Verdict.choices)
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)
    version = models.PositiveIntegerField(
        default=1, help_text="1 for a trial's first decision; each change adds one."
    )

    class Meta:
        ordering = ["trial_id", "-version"]
        constraints = [
            models.UniqueConstraint(
                fields=["trial", "version"], name="adjudication_one_per_version"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.verdict} on {self.trial_id} by {self.decided_by_id}"


class PreferenceLabel(models.Model):
    """A human preference on a pair: A, B, or ``tie`` (left out of a pairwise judge's agreement,
    counted apart); one per reviewer and pair.
    """

    class Preferred(models.TextChoices):
        A = "A", "A"
        B = "B", "B"
        TIE = "tie", "tie"

    pair = models.ForeignKey("evals.TrialPair", on_delete=models.CASCADE, related_name="labels")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="preference_labels",
    )
    reviewer_name = models.CharField(max_length=200, blank=True)
    # In the pair's own naming (A: ``trial_a``, the base run's; B: ``trial_b``, the head
    # run's), mapped from the response the reviewer chose on screen through the pair's
    # ``PreferenceOrder``; ``shown_swapped`` keeps that order (null: imported, order unknown).
    preferred = models.CharField(max_length=3, choices=Preferred.choices)
    shown_swapped = models.BooleanField(
        null=True,
        blank=True,
        help_text="the order the pair was shown in: true when the head run's response was "
        "response A on screen; null for an imported preference",
    )
    critique = models.TextField(blank=True)
    source = models.CharField(max_length=10, choices=Label.Source.choices, default="reviewer")
    details = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    version = models.PositiveIntegerField(
        default=1,
        help_text="1 for a reviewer's first preference on the pair; each change adds one "
        "(a form showing no preference carries 0)",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pair", "reviewer"],
                condition=models.Q(reviewer__isnull=False),
                name="preference_label_one_per_reviewer",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.preferred} on pair {self.pair_id}"


class GuidelinesVersion(models.Model):
    """One version of a calibration set's guidelines (1, 2, ...): the text, who wrote it and
    when; never edited or deleted. Labels name the version they were given under."""

    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.CASCADE, related_name="guidelines_versions"
    )
    version = models.PositiveIntegerField()
    text = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["calibration_set_id", "version"]
        constraints = [
            models.UniqueConstraint(
                fields=["calibration_set", "version"], name="guidelines_version_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"guidelines v{self.version} of set {self.calibration_set_id}"


class SetReveal(models.Model):
    """When a reviewer first had a label on every item of a set, making its judge verdicts
    visible to them (``labeling.freeze``). Never deleted: a top-up does not thaw what was seen.
    """

    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.CASCADE, related_name="reveals"
    )
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="set_reveals"
    )
    revealed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["calibration_set", "reviewer"], name="set_reveal_unique_reviewer"
            ),
        ]

    def __str__(self) -> str:
        return f"set {self.calibration_set_id} revealed to {self.reviewer_id}"


class PreferenceOrder(models.Model):
    """The order a pair is shown in (``labeling.preferences``): ``swapped`` shows ``trial_b``
    (the head run's) as response A. Written once.
    """

    pair = models.OneToOneField(
        "evals.TrialPair", on_delete=models.CASCADE, related_name="preference_order"
    )
    swapped = models.BooleanField()
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"pair {self.pair_id} {'swapped' if self.swapped else 'in order'}"


class ItemNote(models.Model):
    """One message in a calibration item's thread between reviewers and leads (Markdown,
    never edited). ``by_lead``: the author held the lead role when writing it (a lead's
    reply closes an open question). Who may read it: ``labeling.notes``.
    """

    item = models.ForeignKey(CalibrationItem, on_delete=models.CASCADE, related_name="notes")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="item_notes"
    )
    text = models.TextField()
    by_lead = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["item_id", "created_at", "id"]
        indexes = [models.Index(fields=["item", "created_at"], name="item_note_item_time")]

    def __str__(self) -> str:
        return f"note {self.id} on item {self.item_id} by {self.author_id}"


class SetAssignment(models.Model):
    """Who labels what in a set (``labeling.assignment``): each item gets ``overlap`` distinct
    reviewers of ``reviewers``. Without one, every reviewer sees every item.
    """

    calibration_set = models.OneToOneField(
        CalibrationSet, on_delete=models.CASCADE, related_name="assignment"
    )
    overlap = models.PositiveIntegerField(help_text="distinct reviewers per item (k)")
    seed = models.BigIntegerField(default=0)  # 0 .. 2**63 - 1 (core.bounds.SEED_MAX)
    reviewers = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="+")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    updated_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"{self.calibration_set_id}: k={self.overlap}"


class ItemAssignment(models.Model):
    """One reviewer assigned one item; the queue joins on (item, reviewer)."""

    item = models.ForeignKey(CalibrationItem, on_delete=models.CASCADE, related_name="assignments")
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="item_assignments"
    )
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    assigned_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["item", "reviewer"], name="item_assignment_unique"),
        ]
        indexes = [models.Index(fields=["reviewer", "item"], name="item_assignment_reviewer")]

    def __str__(self) -> str:
        return f"item {self.item_id} -> {self.reviewer_id}"


class AssignmentChange(models.Model):
    """A record of every assignment change: who, when, what (``action`` "assign" or
    "reassign"; ``details``: overlap, seed, reviewer names, items moved).
    """

    calibration_set = models.ForeignKey(
        CalibrationSet, on_delete=models.CASCADE, related_name="assignment_changes"
    )
    action = models.CharField(max_length=20)
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(default=timezone.now)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.action} on {self.calibration_set_id} at {self.at:%Y-%m-%d %H:%M}"

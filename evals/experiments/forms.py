"""The form that starts an experiment from a page: the shared settings (``ExperimentStartForm``)
and one row per variant (``VariantForm`` in ``VariantFormSet``): a label and the fields engineers
change (prompt template, system prompt, model, settings, other fields), the rest copied from the
base target. A value that looks like a key is never shown back (``core.forms.StorableForm``)."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms

from core.bounds import SEED_MAX, TEXT_MAX_CHARS
from core.errors import DomainError
from core.forms import StorableForm
from evals.experiments.racing import ROUNDS_MAX, TRIALS_PER_ROUND_MAX
from evals.experiments.start import ALPHA_RANGE, LABEL_MAX, MAX_VARIANTS, MIN_VARIANTS, NAME_MAX
from evals.forms import _json_field_value
from evals.models import Experiment, Run, Suite
from evals.run_like import keys_emptied
from evals.runner.start import DEFAULT_TRIALS_PER_CASE, MAX_TRIALS_PER_CASE
from providers.endpoint import looks_like_a_key

# A variant's target field (``variants[i].target.<name>...``) shown on the row's field.
ROW_TARGET_FIELDS = {
    "prompt_template": "prompt_template",
    "system_prompt": "system_prompt",
    "model": "model",
    "settings": "settings_json",
}
_VARIANT_FIELD = re.compile(r"^variants\[(\d+)\](?:\.(label|target)(?:\.([A-Za-z_]+))?)?")


class ExperimentStartForm(StorableForm):
    """The settings every variant shares: suite, name, trials per case, graders, the base target
    (JSON; each variant starts from it), alpha, metric and k, seed."""

    withheld_json_fields = ("base_target",)
    withheld_secret = looks_like_a_key

    suite = forms.ModelChoiceField(
        queryset=Suite.objects.order_by("name"), to_field_name="uuid", empty_label=None
    )
    name = forms.CharField(max_length=NAME_MAX)
    trials_per_case = forms.IntegerField(
        min_value=1, max_value=MAX_TRIALS_PER_CASE, initial=DEFAULT_TRIALS_PER_CASE
    )
    graders = forms.CharField(
        label="Grader set (JSON list)",
        initial="[]",
        max_length=TEXT_MAX_CHARS["form.json"],
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}),
        help_text="The same graders grade every variant.",
    )
    base_target = forms.CharField(
        label="Base target (JSON object)",
        max_length=TEXT_MAX_CHARS["form.json"],
        widget=forms.Textarea(attrs={"rows": 6, "class": "mono"}),
        help_text="Every variant starts from this target; a variant's fields below replace "
        "its own (an empty field keeps the base's).",
    )
    alpha = forms.FloatField(
        min_value=ALPHA_RANGE[0],
        max_value=ALPHA_RANGE[1],
        initial=0.05,
        help_text="The best set holds the best variant with confidence 1 − alpha.",
    )
    metric = forms.ChoiceField(choices=Experiment.Metric.choices, initial="pass_rate")
    k = forms.IntegerField(min_value=1, initial=1, help_text="For pass^k only.")
    seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=SEED_MAX,
        help_text="Optional: the same seed for a case and attempt in every variant.",
    )

    def clean_graders(self) -> list[dict]:
        return _json_field_value(self.cleaned_data["graders"], field="graders", expected=list)

    def clean_base_target(self) -> dict:
        return _json_field_value(
            self.cleaned_data["base_target"], field="base_target", expected=dict
        )


class SettleForm(forms.Form):
    """Settle with more trials: ``rounds``, ``trials_per_round`` (``evals.experiments.racing``)."""

    rounds = forms.IntegerField(min_value=1, max_value=ROUNDS_MAX, initial=2)
    trials_per_round = forms.IntegerField(
        min_value=1, max_value=TRIALS_PER_ROUND_MAX, initial=5, label="Trials per round"
    )


class VariantForm(StorableForm):
    """One variant: a label and the target fields it changes (empty: the base target's)."""

    withheld_json_fields = ("settings_json", "other_json")
    withheld_secret = looks_like_a_key

    label = forms.CharField(max_length=LABEL_MAX)
    prompt_template = forms.CharField(
        required=False,
        max_length=TEXT_MAX_CHARS["prompt_template"],
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    system_prompt = forms.CharField(
        required=False,
        max_length=TEXT_MAX_CHARS["prompt_template"],
        widget=forms.Textarea(attrs={"rows": 2}),
    )
    model = forms.CharField(max_length=200, required=False)
    settings_json = forms.CharField(
        required=False,
        label="Settings (JSON object)",
        max_length=TEXT_MAX_CHARS["form.json"],
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
    )
    other_json = forms.CharField(
        required=False,
        label="Other fields (JSON object)",
        max_length=TEXT_MAX_CHARS["form.json"],
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
        help_text='Merged over the base target, e.g. {"default_pass_probability": 0.9}.',
    )

    def clean_settings_json(self) -> dict | None:
        raw = self.cleaned_data["settings_json"]
        return _json_field_value(raw, field="settings", expected=dict) if raw.strip() else None

    def clean_other_json(self) -> dict | None:
        raw = self.cleaned_data["other_json"]
        return _json_field_value(raw, field="other", expected=dict) if raw.strip() else None

    def target(self, base: dict) -> dict:
        """``base`` with this row's non-empty fields in place (a copy)."""
        data = self.cleaned_data
        target = json.loads(json.dumps(base))
        for name in ("prompt_template", "system_prompt", "model"):
            if data.get(name, "").strip():
                target[name] = data[name]
        if data.get("settings_json") is not None:
            target["settings"] = data["settings_json"]
        if data.get("other_json"):
            target.update(data["other_json"])
        return target


VariantFormSet = forms.formset_factory(
    VariantForm,
    extra=0,
    can_delete=True,
    min_num=MIN_VARIANTS,
    max_num=MAX_VARIANTS,
    validate_min=True,
    validate_max=True,
)


def variant_rows_initial(run: Run | None) -> list[dict[str, Any]]:
    """The rows a new form shows: the run's target as variant 1 (its editable fields) and an
    empty second row; without a run two empty rows."""
    if run is None:
        return [{"label": "a"}, {"label": "b"}]
    target = run.target or {}
    first: dict[str, Any] = {"label": "baseline"}
    for name in ("prompt_template", "system_prompt", "model"):
        if isinstance(target.get(name), str):
            first[name] = keys_emptied(target[name])
    if isinstance(target.get("settings"), dict):
        first["settings_json"] = json.dumps(keys_emptied(target["settings"]))
    return [first, {"label": "variant"}]


def form_initial(run: Run | None, suite: Suite | None) -> dict[str, Any]:
    """The shared fields' initial values: the run's suite, graders, trials per case and target;
    else the suite with an empty grader set and a simulated target."""
    if run is not None:
        return {
            "suite": run.suite,
            "name": f"{run.name} experiment"[:NAME_MAX],
            "trials_per_case": run.trials_per_case,
            "graders": json.dumps(run.graders, indent=2),
            "base_target": json.dumps(keys_emptied(run.target), indent=2),
        }
    return {
        "suite": suite,
        "graders": "[]",
        "base_target": json.dumps({"kind": "simulated", "seed": 1}, indent=2),
    }


def variants_posted(form: ExperimentStartForm, rows: Any) -> tuple[list[dict], list[VariantForm]]:
    """``(variants, row_forms)`` for ``experiment_start``: the kept rows' ``{"label", "target"}``
    in order and the row form of each (index ``i`` of ``variants[i]``)."""
    kept = [f for f in rows.forms if not (rows.can_delete and f.cleaned_data.get("DELETE"))]
    base = form.cleaned_data["base_target"]
    variants = [{"label": f.cleaned_data["label"], "target": f.target(base)} for f in kept]
    return variants, kept


def experiment_error_show(
    error: DomainError, *, form: ExperimentStartForm, rows: list[VariantForm]
) -> None:
    """``error`` on the field it names: ``variants[i].target.<name>`` on row ``i``'s field of
    that name (the settings on its settings field, other fields on "other fields"),
    ``variants[i].label`` on its label, a shared field on the form's, else above the form."""
    match = _VARIANT_FIELD.match(error.field or "")
    if match is None:
        name = (error.field or "").split(".")[0].split("[")[0]
        if name == "target":
            name = "base_target"
        form.add_error(name if name in form.fields else None, str(error))
        return
    index, part, target_field = int(match.group(1)), match.group(2), match.group(3)
    if index >= len(rows):
        form.add_error(None, str(error))
        return
    row = rows[index]
    if part == "label":
        row.add_error("label", error.message)
    elif part == "target":
        row.add_error(ROW_TARGET_FIELDS.get(target_field or "", "other_json"), str(error))
    else:
        row.add_error(None, str(error))

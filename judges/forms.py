"""Forms of the judges app: a judge version (create, or "edit" = a new version) and a judge
run. JSON fields are parsed here, at the edge; the service validates the rest and names the
field in its error."""

from __future__ import annotations

import json

from django import forms

from core.bounds import INT_MAX, TEXT_MAX_CHARS
from core.errors import DomainError
from core.forms import StorableForm
from core.strict_json import json_loads_strict
from core.text import unstorable_refuse
from evals.models import Run
from judges.models import Judge, JudgeVersion
from providers.endpoint import looks_like_a_key

CALLABLE_KINDS = [(k, label) for k, label in Judge.Kind.choices if k != Judge.Kind.RECORDED]


def _json_object(raw: str, field: str) -> dict:
    raw = (raw or "").strip()
    if not raw:
        return {}
    try:
        value = json_loads_strict(raw)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"{field}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from exc
    except ValueError as exc:  # a key twice, NaN/Infinity
        raise forms.ValidationError(f"{field}: {exc}") from exc
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{field}: expected a JSON object")
    try:
        unstorable_refuse(value, field=field)  # a \u0000 or \ud800 escape in the JSON
    except DomainError as exc:
        raise forms.ValidationError(str(exc)) from exc
    return value


class JudgeVersionForm(StorableForm):
    """A judge version's content; an empty template or schema takes the kind's default. A
    parameter that looks like a key is never shown back (``StorableForm``)."""

    withheld_json_fields = ("params_json",)
    withheld_secret = looks_like_a_key

    name = forms.CharField(max_length=200, help_text="The judge's name; versions share it.")
    kind = forms.ChoiceField(choices=CALLABLE_KINDS)
    base_url = forms.CharField(
        max_length=500,
        label="Base URL",
        help_text="OpenAI-compatible endpoint, e.g. http://host/v1 (Anthropic's: "
        "https://api.anthropic.com/v1, an Azure resource's: https://<resource>.openai.azure.com, "
        "with a provider in the parameters)",
    )
    model = forms.CharField(max_length=200)
    prompt_template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 8}),
        required=False,
        max_length=TEXT_MAX_CHARS["prompt_template"],
        help_text="Empty: the kind's default template (stored with the version). "
        "Placeholders are $name or ${name}: $output, $input, $reference, $criteria "
        "(rubric); $response_a, $response_b (pairwise); $documents, $document_ids "
        "(faithfulness, context relevance). $$ is a literal $; braces are plain text, and "
        "{output} is refused.",
    )
    params_json = forms.CharField(
        label="Parameters (JSON)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        initial="{}",
        max_length=TEXT_MAX_CHARS["judge.params"],  # refused before it is parsed
        help_text='e.g. {"temperature": 0, "max_tokens": 400, "criteria": "..."}; add '
        '"provider": "anthropic" for Claude (max_tokens then required), or "provider": "azure" '
        'with "deployment" and "api_version" for Azure OpenAI',
    )
    output_schema_json = forms.CharField(
        label="Output schema (JSON)",
        widget=forms.Textarea(attrs={"rows": 3}),
        required=False,
        max_length=TEXT_MAX_CHARS["judge.output_schema"],
        help_text="Empty: the kind's default schema (reasoning before verdict).",
    )
    threshold = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        help_text="For score-based judges: passed = score >= threshold.",
    )

    def clean_params_json(self) -> dict:
        return _json_object(self.cleaned_data["params_json"], "params")

    def clean_output_schema_json(self) -> dict:
        return _json_object(self.cleaned_data["output_schema_json"], "output_schema")

    @classmethod
    def initial_from(cls, version) -> dict:
        """The form's initial values copied from an existing version (to "edit" it)."""
        return {
            "name": version.judge.name,
            "kind": version.judge.kind,
            "base_url": version.base_url,
            "model": version.model,
            "prompt_template": version.prompt_template,
            "params_json": json.dumps(version.params, indent=2, ensure_ascii=False),
            "output_schema_json": json.dumps(version.output_schema, indent=2, ensure_ascii=False)
            if version.output_schema
            else "",
            "threshold": version.threshold,
        }


class RunChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, obj: Run) -> str:
        return f"{obj.suite.name} / {obj.name} ({obj.status})"


class JudgeRunForm(StorableForm):
    """Which run to grade, and optionally a random sample of its ok trials."""

    run = RunChoiceField(
        queryset=Run.objects.exclude(status__in=[Run.Status.QUEUED, Run.Status.RUNNING])
        .select_related("suite")
        .order_by("-created_at"),
        to_field_name="uuid",
    )
    sample = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=INT_MAX,
        help_text="Empty: every ok trial of the run.",
    )


class PairwiseJudgeRunForm(StorableForm):
    """Compare a head run with a base run with a pairwise judge version (the comparison
    page's form); the service checks that the runs are finished and of one suite."""

    base_run = forms.ModelChoiceField(
        queryset=Run.objects.all(), to_field_name="uuid", widget=forms.HiddenInput
    )
    head_run = forms.ModelChoiceField(
        queryset=Run.objects.all(), to_field_name="uuid", widget=forms.HiddenInput
    )
    judge_version = forms.ModelChoiceField(
        queryset=JudgeVersion.objects.filter(judge__kind=Judge.Kind.PAIRWISE).select_related(
            "judge"
        ),
        to_field_name="uuid",
        label="Pairwise judge version",
    )

"""Forms for the dashboard: parse and validate at the edge, hand typed values to services."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.db.models import QuerySet
from django.urls import reverse_lazy

from core.bounds import SEED_MAX, TEXT_MAX_CHARS
from core.errors import DomainError
from core.forms import StorableForm
from core.strict_json import json_loads_strict
from core.text import unstorable_refuse
from evals.cases import CaseSpec, context_problem, tags_problem
from evals.grading.grader_config import parse_grader_specs
from evals.models import GraderSetPreset, Run, Suite, TargetPreset
from evals.run_status import IMPORTED
from evals.runner.start import DEFAULT_TRIALS_PER_CASE, MAX_TRIALS_PER_CASE
from evals.runner.targets.openai import OpenAIConfig, prompt_template_check
from providers.endpoint import api_key_env_problem, looks_like_a_key
from providers.protocols import KEY_ENV_DEFAULTS, PROVIDER_FIELDS, PROVIDERS

TARGET_KINDS = [
    ("simulated", "Simulated (seeded, no network)"),
    ("openai", "OpenAI-compatible chat endpoint"),
    ("callable", "Python callable"),
    ("preset", "Target preset (declared with apply_config)"),
]
PROVIDER_LABELS = {
    "openai": "OpenAI-compatible chat completions (OpenAI, vLLM, Ollama, llama.cpp, ...)",
    "anthropic": "Anthropic Messages API",
    "azure": "Azure OpenAI deployment",
}
PROVIDER_CHOICES = [(name, PROVIDER_LABELS[name]) for name in PROVIDERS]
# A model target's errors (``target.<name>...``) shown on the form's field of that name; the
# settings' on the JSON field.
TARGET_ERROR_FIELDS = {"settings": "settings_json"}


def _json_field_value(raw: str, *, field: str, expected: type) -> Any:
    """``raw`` as JSON of type ``expected``; ``ValidationError`` naming ``field``, line, column."""
    try:
        value = json_loads_strict(raw or ("[]" if expected is list else "{}"))
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"{field}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    except ValueError as exc:  # a key twice, NaN/Infinity
        raise forms.ValidationError(f"{field}: {exc}") from exc
    if not isinstance(value, expected):
        kind = "a list" if expected is list else "an object"
        raise forms.ValidationError(f"{field}: expected {kind}, got {type(value).__name__}")
    try:
        unstorable_refuse(value, field=field)  # a \u0000 or \ud800 escape in the JSON
    except DomainError as exc:
        raise forms.ValidationError(str(exc)) from exc
    return value


class RunStartForm(StorableForm):
    """Start a run: suite, target, trials per case (1..50), grader set, name, source version.
    ``cleaned_data["target"]`` is the target snapshot dict (a copy of the preset's config for
    ``target_kind = "preset"``); ``cleaned_data["graders"]`` the spec dicts, checked by
    ``parse_grader_specs``. A value that looks like a key is never shown back (``StorableForm``),
    ticked "no key" or not."""

    # The provider's fields too (versions, a deployment's name): a key pasted in the wrong box.
    withheld_fields = ("api_key_env", *sorted({f for fs in PROVIDER_FIELDS.values() for f in fs}))
    withheld_json_fields = ("settings_json",)
    withheld_secret = looks_like_a_key

    suite = forms.ModelChoiceField(
        queryset=Suite.objects.order_by("name"), to_field_name="uuid", empty_label=None
    )
    name = forms.CharField(max_length=200)
    source_version = forms.CharField(
        max_length=200, required=False, help_text="Commit, tag or prompt revision under test."
    )
    against = forms.ModelChoiceField(
        queryset=Run.objects.filter(status=Run.Status.SUCCEEDED, source=Run.Source.EXECUTED)
        .select_related("suite")
        .order_by("-created_at"),
        to_field_name="uuid",
        required=False,
        label="Adaptive, against",
        help_text="Optional: a succeeded run of the suite to compare with. After the first N "
        "trials per case, more trials go only to cases whose comparison is still uncertain "
        "(up to 4N), until the gate's answer cannot change.",
    )
    target_kind = forms.ChoiceField(
        choices=TARGET_KINDS, widget=forms.RadioSelect, initial="simulated", label="Target"
    )
    seed = forms.IntegerField(
        required=False,
        initial=1,
        min_value=0,
        max_value=SEED_MAX,
        help_text="Simulated target only.",
    )
    pass_probability = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        initial=0.7,
        help_text="Simulated target only: chance that a trial gives the expected answer.",
    )
    provider = forms.ChoiceField(
        choices=PROVIDER_CHOICES,
        required=False,
        initial=PROVIDERS[0],
        help_text="The protocol the endpoint speaks (docs/providers/).",
    )
    anthropic_version = forms.CharField(
        max_length=64,
        required=False,
        label="Anthropic version",
        help_text="Anthropic only: the anthropic-version header (empty: 2023-06-01). Anthropic "
        'also needs "max_tokens" in the settings.',
    )
    deployment = forms.CharField(
        max_length=64,
        required=False,
        help_text="Azure only: the deployment's name, as in Azure's portal (e.g. gpt-4o-mini).",
    )
    api_version = forms.CharField(
        max_length=40,
        required=False,
        label="API version",
        help_text="Azure only: the api-version every call names (e.g. 2024-10-21).",
    )
    base_url = forms.URLField(
        required=False,
        label="Base URL",
        assume_scheme="https",
        help_text="e.g. https://api.example.com/v1, https://api.anthropic.com/v1, or an Azure "
        "resource's https://<resource>.openai.azure.com",
    )
    model = forms.CharField(max_length=200, required=False)
    api_key_env = forms.CharField(
        max_length=200,
        required=False,
        label="API key variable",
        help_text="The name of the environment variable that holds the endpoint's key on the "
        "workers (e.g. MISTRAL_API_KEY), never the key itself; empty: the provider's "
        f"({', '.join(KEY_ENV_DEFAULTS.values())}). Retries and top-ups read the same variable.",
    )
    no_api_key = forms.BooleanField(
        required=False,
        label="The endpoint takes no key",
        help_text="A local or keyless endpoint: no key is sent, now or when more trials are added.",
    )
    prompt_template = forms.CharField(
        required=False,
        max_length=TEXT_MAX_CHARS["prompt_template"],
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Placeholders: $input (the case input), $expected, $context, $key, $tags, "
        "$attempt, also written ${input}; use at least one of $input, $expected, $context, "
        "$key. $$ is a literal $; braces are plain text, so JSON needs no escaping.",
    )
    settings_json = forms.CharField(
        required=False,
        label="Settings (JSON object)",
        initial="{}",
        max_length=TEXT_MAX_CHARS["form.json"],  # refused before it is parsed
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        help_text='e.g. {"temperature": 0.7, "max_tokens": 512}',
    )
    callable_path = forms.CharField(
        required=False,
        max_length=300,
        label="Callable path",
        help_text="A registered pipeline's name (package.module:function); "
        "the registries are the operator's ASSAY_REGISTRIES.",
    )
    target_preset = forms.ModelChoiceField(
        queryset=TargetPreset.objects.order_by("name"),
        to_field_name="name",
        required=False,
        help_text="Declared in a TOML file with manage.py apply_config.",
    )
    trials_per_case = forms.IntegerField(
        min_value=1, max_value=MAX_TRIALS_PER_CASE, initial=DEFAULT_TRIALS_PER_CASE
    )
    grader_set = forms.ModelChoiceField(
        queryset=GraderSetPreset.objects.order_by("name"),
        to_field_name="name",
        required=False,
        label="Grader set preset",
        help_text="If chosen, used instead of the JSON grader set below.",
    )
    graders = forms.CharField(
        label="Grader set (JSON list)",
        initial="[]",
        max_length=TEXT_MAX_CHARS["form.json"],
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono"}),
        help_text='A list of {"key", "kind", "config", "gating"} objects.',
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Choosing a suite reloads the grader set prefill (htmx; the field id is the target).
        self.fields["suite"].widget.attrs.update(
            {
                "hx-get": reverse_lazy("evals:run-new"),
                "hx-trigger": "change",
                "hx-target": "#graders-field",
                "hx-swap": "outerHTML",
            }
        )
        if not self.is_bound and not TargetPreset.objects.exists():
            self.fields["target_kind"].choices = TARGET_KINDS[:-1]

    def clean_settings_json(self) -> dict:
        return _json_field_value(
            self.cleaned_data["settings_json"], field="settings", expected=dict
        )

    def clean_graders(self) -> list[dict]:

        raw = _json_field_value(self.cleaned_data["graders"], field="graders", expected=list)
        try:
            parse_grader_specs(raw)
        except DomainError as exc:
            raise forms.ValidationError(str(exc)) from exc
        return raw

    def clean(self) -> dict:
        super().clean()
        data = self.cleaned_data
        kind = data.get("target_kind")
        required = {
            "simulated": ["seed"],
            "openai": ["base_url", "model", "prompt_template"],
            "callable": ["callable_path"],
            "preset": ["target_preset"],
        }.get(kind or "", [])
        for name in required:
            if data.get(name) in (None, ""):
                self.add_error(name, f"Required for the {kind} target.")
        if kind == "openai" and data.get("api_key_env") and not data.get("no_api_key"):
            problem = api_key_env_problem(data["api_key_env"].strip())
            if problem:
                self.add_error("api_key_env", problem)
        if kind == "openai" and data.get("prompt_template"):
            try:
                prompt_template_check(data["prompt_template"])
            except DomainError as exc:
                self.add_error("prompt_template", exc.message)
        if kind == "openai" and not self.errors:
            self._model_target_check(data)
        suite, run_name = data.get("suite"), data.get("name")
        if suite and run_name and Run.objects.filter(suite=suite, name=run_name).exists():
            self.add_error("name", f"This suite already has a run named {run_name!r}.")
        if not self.errors:
            data["target"] = self._target(data)
            if data.get("grader_set"):
                data["graders"] = list(data["grader_set"].graders)
        return data

    def _model_target_check(self, data: dict) -> None:
        """The model target's config as a run would parse it, its error shown on the field it
        names (``target.deployment`` on Deployment, ``target.settings.max_tokens`` on
        Settings), else above the form."""
        try:
            OpenAIConfig.parse(self._target(data))
        except DomainError as exc:
            name = (exc.field or "").removeprefix("target.").split(".")[0]
            name = TARGET_ERROR_FIELDS.get(name, name)
            if name in self.fields:
                self.add_error(name, exc.message)
            else:
                self.add_error(None, str(exc))

    @staticmethod
    def _target(data: dict) -> dict:
        kind = data["target_kind"]
        if kind == "preset":
            return dict(data["target_preset"].config)
        if kind == "simulated":
            target = {"kind": "simulated", "seed": data["seed"]}
            if data.get("pass_probability") is not None:
                target["default_pass_probability"] = data["pass_probability"]
            return target
        if kind == "openai":
            target = {"kind": "openai"}
            provider = data.get("provider") or PROVIDERS[0]
            if provider != PROVIDERS[0]:
                target["provider"] = provider
            for name in PROVIDER_FIELDS.get(provider, ()):
                if (data.get(name) or "").strip():
                    target[name] = data[name].strip()
            target.update(base_url=data["base_url"], model=data["model"])
            if data.get("no_api_key"):
                target["api_key_env"] = None  # keyless: no key sent, by retries and top-ups too
            elif (data.get("api_key_env") or "").strip():
                target["api_key_env"] = data["api_key_env"].strip()
            return {
                **target,
                "prompt_template": data["prompt_template"],
                "settings": data.get("settings_json") or {},
            }
        target = {"kind": "callable", "path": data["callable_path"]}
        if data.get("settings_json"):  # checked against the function's parameters at start
            target["settings"] = data["settings_json"]
        return target


class BaselineSetForm(StorableForm):
    """Make a run its suite's baseline, with an optional note (at most 500 characters)."""

    note = forms.CharField(
        required=False,
        max_length=500,
        widget=forms.TextInput(
            attrs={"placeholder": "note (optional)", "aria-label": "Baseline note"}
        ),
    )


RUN_FILTER_STATUS_CHOICES = [*Run.Status.choices, (IMPORTED, "imported")]
# The values ``?status=`` of the run list takes.
RUN_FILTER_STATUSES = [value for value, _ in RUN_FILTER_STATUS_CHOICES]


class RunFilterForm(forms.Form):
    """The run list's filters (GET), shown with the values the page read: suite UUID and shown
    status. The view parses them (``core.http``), never this form."""

    suite = forms.ModelChoiceField(
        queryset=Suite.objects.order_by("name"),
        to_field_name="uuid",
        required=False,
        empty_label="All suites",
    )
    status = forms.ChoiceField(
        choices=[("", "Any status"), *RUN_FILTER_STATUS_CHOICES],
        required=False,
        help_text="The status the run's badge shows: an imported run is 'imported', never "
        "'succeeded'.",
    )


INPUT_FORMATS = [("text", "Text"), ("json", "JSON object")]
EXPECTED_FORMATS = [("none", "None"), ("text", "Text"), ("json", "JSON value")]


def _form_text(raw: str) -> str:
    """A textarea's value as typed: browsers send line breaks as CRLF."""
    return raw.replace("\r\n", "\n")


def _json_any(raw: str, *, field: str) -> Any:
    """``raw`` as one strict JSON value; else ``ValidationError`` naming ``field``, line, column."""
    try:
        return json_loads_strict(raw)
    except json.JSONDecodeError as exc:
        raise forms.ValidationError(
            f"{field}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc
    except ValueError as exc:  # a key twice, NaN/Infinity
        raise forms.ValidationError(f"{field}: {exc}") from exc


def _tags_text(tags: list[str]) -> str:
    """``tags`` comma-separated, or a JSON list when commas would not read back the same tags."""
    text = ", ".join(tags)
    plain = all(t and "," not in t and t == t.strip() for t in tags)
    if plain and not text.startswith("["):
        return text
    return json.dumps(tags, ensure_ascii=False)


def _json_pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


class CaseForm(StorableForm):
    """A case's content as a person edits it (editor, "New case", "Add as a case");
    ``cleaned_data["spec"]`` is a ``CaseSpec`` the service checks (``case_spec_check``). With
    ``suites`` (those the user may edit) the form adds ``suite``, ``replace`` (an explicit
    choice to replace other content under the key) and ``source_trial``."""

    suite = forms.ModelChoiceField(queryset=Suite.objects.none(), to_field_name="uuid")
    key = forms.CharField(max_length=200, help_text="Unique among the suite's active cases.")
    input_format = forms.ChoiceField(choices=INPUT_FORMATS, initial="text", label="Input is")
    input = forms.CharField(strip=False, widget=forms.Textarea(attrs={"rows": 6}))
    expected_format = forms.ChoiceField(
        choices=EXPECTED_FORMATS, initial="text", label="Expected answer is"
    )
    expected = forms.CharField(
        strip=False,
        required=False,
        label="Expected answer",
        widget=forms.Textarea(attrs={"rows": 6}),
        help_text='As JSON, "false" is the text false and false the boolean.',
    )
    context = forms.CharField(
        required=False,
        initial="[]",
        label="Context documents (JSON list)",
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        help_text='e.g. [{"id": "doc-1", "text": "..."}]',
    )
    tags = forms.CharField(
        required=False,
        help_text='Separated by commas, or a JSON list (["a, b", "c"]) for tags that hold a '
        "comma or start or end with a space.",
    )
    goal_state = forms.CharField(
        required=False,
        label="Goal state (JSON, agent cases)",
        widget=forms.Textarea(attrs={"rows": 3, "class": "mono"}),
        help_text="The world's wanted final state after an agent's run; empty for none.",
    )
    replace = forms.BooleanField(
        required=False,
        label="Replace the active case with this key",
        help_text="Only when the key is taken by a case with other content: that case is "
        "retired and this one replaces it.",
    )
    source_trial = forms.UUIDField(required=False, widget=forms.HiddenInput)
    # The editor only: the tags as the page showed them (a JSON list), so a tag edit made
    # from a stale page is refused instead of overwriting another tab's (case_edit).
    tags_seen = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, suites: QuerySet | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        if suites is None:
            for name in ("suite", "replace", "source_trial"):
                del self.fields[name]
        else:
            suite_field = self.fields["suite"]
            assert isinstance(suite_field, forms.ModelChoiceField)
            suite_field.queryset = suites
            del self.fields["tags_seen"]

    @staticmethod
    def initial_from(spec) -> dict[str, Any]:
        """The form's initial values for a ``CaseSpec`` (or a ``Case``)."""
        expected = spec.expected
        return {
            "key": spec.key,
            "input_format": "text" if isinstance(spec.input, str) else "json",
            "input": spec.input if isinstance(spec.input, str) else _json_pretty(spec.input),
            "expected_format": "none"
            if expected is None
            else ("text" if isinstance(expected, str) else "json"),
            "expected": ""
            if expected is None
            else (expected if isinstance(expected, str) else _json_pretty(expected)),
            "context": _json_pretty(list(spec.context or [])),
            "tags": _tags_text(list(spec.tags or [])),
            "goal_state": "" if spec.goal_state is None else _json_pretty(spec.goal_state),
            "tags_seen": json.dumps(list(spec.tags or [])),
        }

    def clean_input(self) -> str:
        return _form_text(self.cleaned_data["input"])

    def clean_expected(self) -> str:
        return _form_text(self.cleaned_data["expected"])

    def clean_context(self) -> list:
        raw = self.cleaned_data["context"].strip()
        value = _json_any(raw, field="context") if raw else []
        problem = context_problem(value)
        if problem is not None:  # the service's rule and words, shown before the rest
            path, message = problem
            raise forms.ValidationError(f"context{path}: {message}")
        return value

    def clean_tags(self) -> list[str]:
        """Comma-separated tags, or a JSON list kept as written when the text starts with ``[``."""
        raw = self.cleaned_data["tags"].strip()
        if raw.startswith("["):
            value = _json_any(raw, field="tags")
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise forms.ValidationError("tags: expected a JSON list of strings")
        else:
            value = [t.strip() for t in raw.split(",") if t.strip()]
        problem = tags_problem(value)
        if problem is not None:  # the service's rule and words: the tag by its index
            path, message = problem
            raise forms.ValidationError(f"tags{path}: {message}")
        return value

    def clean_tags_seen(self) -> list[str] | None:
        """The tags the editor showed, or None when the page sent none (nothing to check)."""
        raw = self.cleaned_data["tags_seen"].strip()
        if not raw:
            return None
        value = _json_any(raw, field="tags_seen")
        if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
            raise forms.ValidationError("tags_seen: expected a JSON list of strings")
        return value

    def clean_goal_state(self) -> Any:
        raw = self.cleaned_data["goal_state"].strip()
        return _json_any(raw, field="goal_state") if raw else None

    def clean(self) -> dict:
        super().clean()
        data = self.cleaned_data
        if self.errors:
            return data
        value = data["input"]
        if data["input_format"] == "json":
            try:
                value = _json_any(value, field="input")
            except forms.ValidationError as exc:
                self.add_error("input", exc)
                return data
            if not isinstance(value, dict):
                self.add_error("input", "input: a JSON input is an object {...}")
                return data
        expected = data["expected"]
        if data["expected_format"] == "none":
            expected = None
        elif data["expected_format"] == "json":
            try:
                expected = _json_any(expected, field="expected")
            except forms.ValidationError as exc:
                self.add_error("expected", exc)
                return data
        data["spec"] = CaseSpec(
            key=data["key"],
            input=value,
            expected=expected,
            context=data["context"],
            tags=data["tags"],
            goal_state=data["goal_state"],
        )
        return data

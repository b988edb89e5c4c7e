"""Starting a run like an earlier one: the start form's fields read from a stored run
(``run_like_initial``), and why a run cannot be started again (``run_like_refusal``).

Everything comes from the stored run (``Run.target``, ``Run.graders``, suite, trials per
case), which never holds a key: ``api_key_env`` is a variable's name, and any value that
looks like a key is left out all the same (``providers.endpoint.looks_like_a_key``). The
name is "<name> (copy)", numbered when taken; the source version is left empty (it names
what changed)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from evals.models import Run
from providers.endpoint import looks_like_a_key
from providers.protocols import PROVIDER_FIELDS, PROVIDERS

# Target keys the start form carries, per kind; any other key of a run's target is named in
# ``RunLike.not_carried`` (a preset or a config file carries them).
FORM_KEYS = {
    "simulated": {"kind", "seed", "default_pass_probability"},
    "openai": {
        "kind",
        "provider",
        "base_url",
        "model",
        "api_key_env",
        "prompt_template",
        "settings",
        *{f for fs in PROVIDER_FIELDS.values() for f in fs},
    },
    "callable": {"kind", "path", "settings"},
}


@dataclass(frozen=True)
class RunLike:
    """The start form's ``initial`` dict (form field name -> value) and ``not_carried``: the
    target's keys the form has no field for, sorted (the new run would lack them)."""

    initial: dict[str, Any]
    not_carried: list[str] = field(default_factory=list)


def run_like_refusal(run: Run) -> str | None:
    """Why ``run`` cannot be started again from the form, or None: an imported run (no target
    Assay can execute) or a target kind the form does not offer."""
    kind = (run.target or {}).get("kind") if isinstance(run.target, dict) else None
    if run.source == Run.Source.IMPORTED or kind == "imported":
        return (
            "This run was imported: Assay holds its results, not a target it can execute, "
            "so it cannot be started again."
        )
    if kind not in FORM_KEYS:
        return f"The start form cannot start a {kind or 'blank'} target; no copy offered."
    return None


def _copy_name(run: Run) -> str:
    """ "<name> (copy)", or "(copy 2)", "(copy 3)"... when taken in the suite; one query."""
    stem = f"{run.name[:180]} (copy"
    taken = set(
        Run.objects.filter(suite_id=run.suite_id, name__startswith=stem).values_list(
            "name", flat=True
        )
    )
    name, n = f"{stem})", 1
    while name in taken:
        n += 1
        name = f"{stem} {n})"
    return name


def _safe(value: Any) -> Any:
    """``value``, or "" when it looks like a key (never prefilled)."""
    return "" if looks_like_a_key(value) else value


def run_like_initial(run: Run) -> RunLike:
    """The start form's fields for a run like ``run``: suite, name (``_copy_name``), trials per
    case, graders (JSON text), the target kind and its fields. Raises ``ValueError`` when
    ``run_like_refusal`` refuses it (the view checks first). One query (the name)."""
    refusal = run_like_refusal(run)
    if refusal:
        raise ValueError(refusal)
    target: dict[str, Any] = dict(run.target)
    kind = target["kind"]
    initial: dict[str, Any] = {
        "suite": run.suite,
        "name": _copy_name(run),
        "trials_per_case": run.trials_per_case,
        "graders": json.dumps(run.graders, indent=2),
        "target_kind": kind,
    }
    if kind == "simulated":
        initial["seed"] = target.get("seed")
        if target.get("default_pass_probability") is not None:
            initial["pass_probability"] = target["default_pass_probability"]
    elif kind == "openai":
        provider = target.get("provider") or PROVIDERS[0]
        initial["provider"] = provider
        for name in PROVIDER_FIELDS.get(provider, ()):
            initial[name] = _safe(target.get(name) or "")
        initial["base_url"] = _safe(target.get("base_url") or "")
        initial["model"] = _safe(target.get("model") or "")
        if "api_key_env" in target and target["api_key_env"] in (None, False):
            initial["no_api_key"] = True
        else:
            initial["api_key_env"] = _safe(target.get("api_key_env") or "")
        initial["prompt_template"] = target.get("prompt_template") or ""
        initial["settings_json"] = json.dumps(keys_emptied(target.get("settings") or {}))
    else:
        initial["callable_path"] = target.get("path") or ""
        initial["settings_json"] = json.dumps(keys_emptied(target.get("settings") or {}))
    not_carried = sorted(k for k in target if k not in FORM_KEYS[kind])
    return RunLike(initial=initial, not_carried=not_carried)


def keys_emptied(settings: Any) -> Any:
    """``settings`` (any JSON value: a target, its settings) with every key-looking string
    emptied, recursively: what a form prefilled from a stored run may show."""
    if isinstance(settings, dict):
        return {k: keys_emptied(v) for k, v in settings.items()}
    if isinstance(settings, list):
        return [keys_emptied(v) for v in settings]
    return _safe(settings)

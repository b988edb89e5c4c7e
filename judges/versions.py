"""Creating a judge version from its definition; content-addressed, every config error a
``DomainError`` naming the field.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from core.bounds import JUDGE_PARAMS_MAX_KEYS, json_size_problem, seed_problem, text_problem
from core.errors import DomainError
from judges import kinds
from judges.client import client_config_parse
from judges.models import Judge, JudgeVersion
from judges.models.versions import judge_version_hash
from providers.endpoint import api_key_env_problem, limit_settings_parse


def judge_version_create(
    *,
    judge_name: str,
    kind: str,
    model: str,
    base_url: str,
    prompt_template: str,
    params: dict,
    output_schema: dict,
    threshold: float | None = None,
) -> tuple[JudgeVersion, bool]:
    """The judge version with this content, created when new: ``(version, created)``. An empty
    ``prompt_template``/``output_schema`` takes the kind's default, so the version records what
    it renders.

    Raises ``DomainError`` naming the field: unknown kind, a same-named judge of another kind,
    non-object params, a template ``kinds.template_check`` refuses, and a text over its limit
    (code ``too_large``, ``core.bounds.TEXT_MAX_CHARS``)."""
    if kind not in Judge.Kind.values or kind == Judge.Kind.RECORDED:
        raise DomainError(f"unknown or not callable kind {kind!r}", field="kind")
    if not judge_name.strip():
        raise DomainError("required", field="judge_name")
    if not model.strip():
        raise DomainError("required", field="model")
    if not base_url.startswith(("http://", "https://")):
        raise DomainError("must start with http:// or https://", field="base_url")
    if not isinstance(params, dict):
        raise DomainError("expected an object", field="params")
    if len(params) > JUDGE_PARAMS_MAX_KEYS:
        raise DomainError(
            f"{len(params):,} keys; at most {JUDGE_PARAMS_MAX_KEYS}",
            field="params",
            code="too_large",
        )
    if problem := json_size_problem(params, "judge.params"):
        raise DomainError(problem, field="params", code="too_large")
    if "seed" in params and (problem := seed_problem(params["seed"])):
        raise DomainError(problem, field="params.seed")
    if isinstance(prompt_template, str) and (
        problem := text_problem(prompt_template, "prompt_template")
    ):
        raise DomainError(problem, field="prompt_template", code="too_large")
    if "api_key_env" in params:
        problem = api_key_env_problem(params["api_key_env"])
        if problem:
            raise DomainError(f"{problem}", field="params.api_key_env")
    limit_settings_parse(params, prefix="params")
    # The client's numbers, bounded as a run target's are: checked now, not at the first
    # judge call (``concurrency`` 10**11 there built one HTTP client per 8 in the worker).
    client_config_parse(base_url=base_url, model=model, params=params)
    if params.get("reply_format", "json") not in ("json", "line"):
        raise DomainError("expected 'json' or 'line'", field="params.reply_format")
    if not isinstance(output_schema, dict):
        raise DomainError("expected an object", field="output_schema")
    if problem := json_size_problem(output_schema, "judge.output_schema"):
        raise DomainError(problem, field="output_schema", code="too_large")
    slots = kinds.verdict_slots_check(kind, params)
    template = prompt_template or kinds.DEFAULT_TEMPLATES[kind]
    try:
        kinds.template_check(kind, template)
    except DomainError as exc:
        raise DomainError(exc.message, field=exc.field) from exc
    if not output_schema and kind not in (kinds.FAITHFULNESS_CLAIMS, kinds.CONTEXT_RELEVANCE):
        output_schema = kinds.default_schema(kind, threshold=threshold)
        if slots:
            output_schema["properties"]["verdict"] = {"enum": list(slots)}
    base_url = base_url.rstrip("/")
    digest = judge_version_hash(
        model=model,
        protocol="",
        prompt_template=template,
        params=params,
        output_schema=output_schema,
        threshold=threshold,
        base_url=base_url,
    )
    for _ in range(3):  # a concurrent creator may win the unique number; read it back
        with transaction.atomic():
            judge, _created = Judge.objects.get_or_create(name=judge_name, defaults={"kind": kind})
            if judge.kind != kind:
                raise DomainError(
                    f"judge {judge_name!r} is a {judge.kind} judge, not {kind}", field="kind"
                )
            judge = Judge.objects.select_for_update().get(pk=judge.pk)
            existing = judge.versions.filter(content_hash=digest).first()
            if existing:
                return existing, False
            last = judge.versions.order_by("-number").values_list("number", flat=True).first()
            try:
                with transaction.atomic():
                    version = JudgeVersion.objects.create(
                        judge=judge,
                        number=(last or 0) + 1,
                        base_url=base_url,
                        model=model,
                        prompt_template=template,
                        params=params,
                        output_schema=output_schema,
                        threshold=threshold,
                    )
                return version, True
            except IntegrityError:
                continue
    raise DomainError("could not create a version (concurrent writers)", field="judge_name")

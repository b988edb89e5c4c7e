"""Judge kinds: what each shows the judge, its answer schema, and how a reply becomes a verdict.

- rubric: input, reference (optional), output; reasoning + verdict PASS/FAIL, or + score
  0..1 when the version has a threshold (passed = score >= threshold).
- pairwise: input, responses A and B; reasoning + verdict A/B (the swap:
  ``judges.pairwise``). ``params["verdict_slots"]`` may map other words to the slots, e.g.
  ``{"PASS": "A", "FAIL": "B"}`` ("is A better?"); the schema's enum is then those words.
- faithfulness: documents and output, NEVER the input; reasoning + verdict PASS/FAIL.
- faithfulness_claims: documents and output, NEVER the input; reasoning + claims [{claim,
  supported, doc_id or null}]; score = supported / claims, passed at >= threshold (1.0).
- context_relevance: input and documents; reasoning + one {doc_id, relevant} per offered
  id; score = relevant / offered, passed at >= threshold (0.5).

Document ids are Assay's (``doc-1``, ``doc-2``... in case order), listed outside the fences
and constrained by an ``enum``, so untrusted text never chooses an id; the case's own ids are
kept in ``details["documents"]``. ``reasoning`` comes first so the judge reasons first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from core.errors import DomainError
from core.placeholders import placeholder_list, placeholders_check
from judges.prompts import (
    FIELDS,
    JudgePrompt,
    examples_render,
    examples_texts,
    fence,
    nonce_new,
    prompt_render,
)

RUBRIC, PAIRWISE, FAITHFULNESS = "rubric", "pairwise", "faithfulness"
FAITHFULNESS_CLAIMS, CONTEXT_RELEVANCE, RECORDED = (
    "faithfulness_claims",
    "context_relevance",
    "recorded",
)
DOCUMENT_KINDS = (FAITHFULNESS, FAITHFULNESS_CLAIMS, CONTEXT_RELEVANCE)


def _json_reply(decision: str) -> str:
    return f'Reply with one JSON object only: first "reasoning", then {decision}.'


# ``$name`` templates (``core.placeholders``); the braces in them are JSON, plain text.
DEFAULT_TEMPLATES: dict[str, str] = {
    RUBRIC: (
        "Judge the output against the criteria.\n\nCriteria:\n$criteria\n\n"
        "Case input:\n$input\n\nReference answer:\n$reference\n\n"
        "Output to judge:\n$output\n\n" + _json_reply('"verdict": "PASS" or "FAIL"')
    ),
    PAIRWISE: (
        "Which response serves the case input better?\n\nCase input:\n$input\n\n"
        "Response A:\n$response_a\n\nResponse B:\n$response_b\n\n"
        + _json_reply('"verdict": "A" or "B"')
    ),
    FAITHFULNESS: (
        "Is every statement of the answer supported by the documents?\n\n"
        "Documents (ids you may cite: $document_ids):\n$documents\n\n"
        "Answer:\n$output\n\n" + _json_reply('"verdict": "PASS" (all supported) or "FAIL"')
    ),
    FAITHFULNESS_CLAIMS: (
        "Split the answer into its factual claims and mark each supported or not by the "
        "documents, citing the id of the supporting document (null when unsupported).\n\n"
        "Documents (ids you may cite: $document_ids):\n$documents\n\n"
        "Answer:\n$output\n\n" + _json_reply('"claims": [{"claim", "supported", "doc_id"}]')
    ),
    CONTEXT_RELEVANCE: (
        "For each document, say whether it is relevant to the question.\n\n"
        "Question:\n$input\n\nDocuments (ids: $document_ids):\n$documents\n\n"
        + _json_reply('"documents": [{"doc_id", "relevant"}], one per id')
    ),
}

# Placeholders a kind offers, in ``prompts.FIELDS`` order; a template using another one is
# refused at version creation.
KIND_FIELDS: dict[str, tuple[str, ...]] = {
    RUBRIC: ("criteria", "input", "reference", "output", "examples"),
    PAIRWISE: ("criteria", "input", "response_a", "response_b"),
    # No "input": the question never reaches a faithfulness call.
    FAITHFULNESS: ("criteria", "output", "documents", "document_ids", "examples"),
    FAITHFULNESS_CLAIMS: ("criteria", "output", "documents", "document_ids"),
    CONTEXT_RELEVANCE: ("criteria", "input", "documents", "document_ids"),
}

# The placeholders that carry the trial a kind judges, each required: without one the judge
# is not shown what its verdict is about (and, without any, every trial gets the same
# prompt). The others (criteria, input for rubric and pairwise, reference, document_ids)
# are optional.
TRIAL_FIELDS: dict[str, tuple[tuple[str, ...], str]] = {
    RUBRIC: (("output",), "the output it grades"),
    PAIRWISE: (("response_a", "response_b"), "both responses it compares"),
    FAITHFULNESS: (("output", "documents"), "the output and the documents it checks it against"),
    FAITHFULNESS_CLAIMS: (
        ("output", "documents"),
        "the output and the documents it checks it against",
    ),
    CONTEXT_RELEVANCE: (("input", "documents"), "the question and the documents it judges"),
}


def _object(properties: dict, required: list[str] | None = None) -> dict:
    return {
        "type": "object",
        "properties": properties,
        "required": required or list(properties),
        "additionalProperties": False,
    }


_REASONING = {"type": "string"}


def default_schema(
    kind: str, *, threshold: float | None = None, ids: list[str] | None = None
) -> dict:
    """The output schema of ``kind`` (``ids``: offered document ids, for the enums)."""
    ids = ids or []
    if kind == RUBRIC and threshold is not None:
        return _object(
            {"reasoning": _REASONING, "score": {"type": "number", "minimum": 0, "maximum": 1}}
        )
    if kind in (RUBRIC, FAITHFULNESS):
        return _object({"reasoning": _REASONING, "verdict": {"enum": ["PASS", "FAIL"]}})
    if kind == PAIRWISE:
        return _object({"reasoning": _REASONING, "verdict": {"enum": ["A", "B"]}})
    if kind == FAITHFULNESS_CLAIMS:
        claim = _object(
            {
                "claim": {"type": "string"},
                "supported": {"type": "boolean"},
                "doc_id": {"enum": [*ids, None]},
            }
        )
        return _object({"reasoning": _REASONING, "claims": {"type": "array", "items": claim}})
    if kind == CONTEXT_RELEVANCE:
        doc = _object({"doc_id": {"enum": ids}, "relevant": {"type": "boolean"}})
        return _object({"reasoning": _REASONING, "documents": {"type": "array", "items": doc}})
    raise ValueError(f"kind: no schema for {kind!r}")


def verdict_slots_check(kind: str, params: dict) -> dict[str, str] | None:
    """A pairwise version's ``params["verdict_slots"]`` (word -> "A"/"B"), or None. Raises
    ``DomainError(field="params.verdict_slots")`` when set on another kind, malformed, or not
    naming both slots."""
    slots = params.get("verdict_slots")
    if slots is None:
        return None
    field_name = "params.verdict_slots"
    if kind != PAIRWISE:
        raise DomainError("only a pairwise judge maps verdict words to slots", field=field_name)
    if not isinstance(slots, dict) or not all(
        isinstance(k, str) and k.strip() and v in ("A", "B") for k, v in slots.items()
    ):
        raise DomainError(
            'expected an object of verdict words to "A" or "B", e.g. {"PASS": "A", "FAIL": "B"}',
            field=field_name,
        )
    if set(slots.values()) != {"A", "B"}:
        raise DomainError("must map a word to each of the slots A and B", field=field_name)
    return dict(slots)


def pairwise_slot(params: dict, word: str | None) -> str | None:
    """The slot ("A"/"B") a reply's verdict word names (through ``verdict_slots``, ignoring
    case), or None."""
    if not word:
        return None
    slots = params.get("verdict_slots")
    if isinstance(slots, dict):
        folded = {str(k).casefold(): v for k, v in slots.items()}
        slot = folded.get(word.casefold())
        return slot if slot in ("A", "B") else None
    return word if word in ("A", "B") else None


def template_check(kind: str, template: str) -> list[str]:
    """The placeholders ``template`` uses as a ``kind`` template. Raises ``DomainError`` (field
    ``prompt_template``) for a name in braces (``{input}``), a malformed ``$``, a placeholder
    ``kind`` does not offer (faithfulness kinds refuse ``$input``), or a missing
    ``TRIAL_FIELDS`` one. Kinds rendering no template pass."""
    if kind not in KIND_FIELDS:
        return []
    offered = KIND_FIELDS[kind]
    names = placeholders_check(
        template,
        field="prompt_template",
        offered=offered,
        recognised=FIELDS,
        context=f"by a {kind} judge",
        error=DomainError,
    )
    required, shown = TRIAL_FIELDS[kind]
    missing = [name for name in required if name not in names]
    if missing:
        raise DomainError(
            f"does not use {placeholder_list(missing)}: a {kind} judge must be shown {shown} "
            f"(placeholders: {placeholder_list(offered)})",
            field="prompt_template",
        )
    return names


@dataclass(frozen=True)
class Material:
    """What a judge may be shown of a trial (all untrusted but ``criteria``)."""

    output: str = ""
    input: str | None = None
    reference: str | None = None
    documents: list[dict] = field(default_factory=list)
    response_a: str | None = None
    response_b: str | None = None


@dataclass(frozen=True)
class Built:
    """The prompt, the reply's schema, and offered ids mapped to the case's own."""

    prompt: JudgePrompt
    schema: dict
    id_map: dict[str, Any]


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def call_build(
    *,
    kind: str,
    template: str,
    criteria: str,
    material: Material,
    output_schema: dict | None,
    threshold: float | None,
    examples: list[dict] | None = None,
) -> Built:
    """Render one call of ``kind``, every untrusted text fenced with one fresh nonce, few-shot
    ``examples`` included (``prompts.examples_render``)."""
    examples = list(examples or [])
    docs = [d if isinstance(d, dict) else {"text": str(d)} for d in material.documents]
    id_map = {f"doc-{i}": d.get("id", f"doc-{i}") for i, d in enumerate(docs, start=1)}
    data: dict[str, str] = {"output": material.output}
    if kind not in (FAITHFULNESS, FAITHFULNESS_CLAIMS) and material.input is not None:
        data["input"] = material.input
    if kind == RUBRIC and material.reference is not None:
        data["reference"] = material.reference
    if kind == PAIRWISE:
        data = {
            "input": material.input or "",
            "response_a": material.response_a or "",
            "response_b": material.response_b or "",
        }
    if kind == CONTEXT_RELEVANCE:
        data.pop("output", None)
    doc_texts = [_text(d.get("text", "")) for d in docs]
    nonce = nonce_new(avoid=[*data.values(), *doc_texts, *examples_texts(examples)])
    documents = (
        "\n\n".join(
            f"Document {doc_id}:\n{fence(text, nonce)}"
            for doc_id, text in zip(id_map, doc_texts, strict=True)
        )
        or "(no documents)"
    )
    trusted = {
        "criteria": criteria or "(no criteria given)",
        "reference": "(no reference answer)",
        "documents": documents,
        "document_ids": ", ".join(id_map) or "(none)",
        "examples": examples_render(examples, nonce),
    }
    prompt = prompt_render(template, trusted=trusted, data=data, nonce=nonce)
    if kind in (FAITHFULNESS_CLAIMS, CONTEXT_RELEVANCE) or not output_schema:
        schema = default_schema(kind, threshold=threshold, ids=list(id_map))
    else:
        schema = output_schema
    return Built(prompt=prompt, schema=schema, id_map=id_map)


@dataclass(frozen=True)
class Outcome:
    """A verdict; ``error`` a parse reason when schema-valid JSON is unusable (no claims, a
    document judged twice)."""

    passed: bool | None
    score: float | None
    reason: str
    details: dict = field(default_factory=dict)
    error: str | None = None
    preferred: str | None = None


def outcome_read(
    *, kind: str, data: dict, id_map: dict[str, Any], threshold: float | None
) -> Outcome:
    """Turn a schema-valid reply into a verdict (module docstring)."""
    reasoning = str(data.get("reasoning", ""))[:4000]
    details: dict[str, Any] = {"reasoning": reasoning}
    if kind == PAIRWISE:
        return Outcome(None, None, f"prefers {data['verdict']}", details, preferred=data["verdict"])
    if kind in (RUBRIC, FAITHFULNESS) and "score" in data and threshold is not None:
        score = float(data["score"])
        passed = score >= threshold
        return Outcome(
            passed,
            score,
            f"score {score:g} {'>=' if passed else '<'} threshold {threshold:g}",
            details,
        )
    if kind in (RUBRIC, FAITHFULNESS, RECORDED):
        verdict = str(data.get("verdict", "")).upper()
        if verdict not in ("PASS", "FAIL"):
            return Outcome(None, None, "", details, error="invalid_verdict")
        passed = verdict == "PASS"
        return Outcome(passed, 1.0 if passed else 0.0, f"judge: {verdict}", details)
    if kind == FAITHFULNESS_CLAIMS:
        claims = data["claims"]
        if not claims:
            return Outcome(None, None, "", details, error="empty")
        for c in claims:
            if c["supported"] and c["doc_id"] is None:
                return Outcome(None, None, "", details, error="unparseable")
        supported = sum(1 for c in claims if c["supported"])
        score = supported / len(claims)
        limit = 1.0 if threshold is None else threshold
        details["claims"] = [
            {
                "claim": c["claim"][:1000],
                "supported": c["supported"],
                "doc_id": c["doc_id"],
                "source_id": id_map.get(c["doc_id"]) if c["doc_id"] else None,
            }
            for c in claims
        ]
        return Outcome(
            score >= limit, score, f"{supported} of {len(claims)} claims supported", details
        )
    if kind == CONTEXT_RELEVANCE:
        seen = [d["doc_id"] for d in data["documents"]]
        if sorted(seen) != sorted(id_map):
            return Outcome(None, None, "", details, error="unparseable")
        relevant = [d["doc_id"] for d in data["documents"] if d["relevant"]]
        score = len(relevant) / len(id_map) if id_map else 0.0
        limit = 0.5 if threshold is None else threshold
        details["documents_relevance"] = [
            {"doc_id": d["doc_id"], "source_id": id_map[d["doc_id"]], "relevant": d["relevant"]}
            for d in sorted(data["documents"], key=lambda d: list(id_map).index(d["doc_id"]))
        ]
        return Outcome(
            score >= limit, score, f"{len(relevant)} of {len(id_map)} documents relevant", details
        )
    raise ValueError(f"kind: cannot read replies of {kind!r}")

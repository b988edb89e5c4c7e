"""A simulated pipeline for the demo and tests; ``kind == "simulated"``, model ``"simulated"``
(no price, so its cost is null).

Config::

    {"kind": "simulated", "seed": 1234,
     "pass_probability": {"c1": 0.9, "c2": 0.2},   # per case key
     "default_pass_probability": 0.7,               # other cases (default 0.5)
     "error_probability": 0.0,                      # each trial errors with this chance
     "latency_ms": 120 | [50, 400],                 # reported latency, fixed or uniform range
     "sleep": false,                                # really wait latency_ms (live demo)
     "wrong_outputs": {"c2": ["...", "..."]},        # per case key: failing outputs to use
     "prompt_template": "...", "prompt_revision": "...",  # recorded in the snapshot only
     "concurrency": 16}                             # calls in flight (1..1024; default 16)

A trial depends only on (seed, case key, attempt), through draws u = blake2b("seed|key|
attempt|salt") / 2^64 (never the per-process salted ``hash()``): it errors when u_error <
error_probability, else passes when u_pass < p, with the case's ``expected`` in the graders'
reference form; a fail is ``wrong_answer`` or one of ``wrong_outputs``."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

from core.bounds import seed_problem
from core.errors import DomainError, value_shown
from evals.grading.graders import parse_number
from evals.runner.targets.base import (
    DEFAULT_CONCURRENCY,
    CaseInput,
    TargetResult,
    concurrency_read,
)

KNOWN_FIELDS = frozenset(
    {
        "kind",
        "seed",
        "pass_probability",
        "default_pass_probability",
        "error_probability",
        "latency_ms",
        "sleep",
        "model",
        "prompt_revision",
        "prompt_template",
        "wrong_outputs",
        "concurrency",
    }
)
WRONG_TEXTS = (
    "I'm not sure; the documents do not say.",
    "It cannot be determined from the information given.",
    "No.",
)
SIMULATED_ERROR = "simulated pipeline error"


@dataclass(frozen=True)
class SimulatedConfig:
    """Parsed config; probabilities in [0, 1], latency in ms (low, high)."""

    seed: int
    pass_probability: dict[str, float] = field(default_factory=dict)
    default_pass_probability: float = 0.5
    error_probability: float = 0.0
    latency_ms: tuple[float, float] = (0.0, 0.0)
    sleep: bool = False
    wrong_outputs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    concurrency: int = DEFAULT_CONCURRENCY

    @classmethod
    def parse(cls, config: dict) -> SimulatedConfig:
        """Validate a config dict; raises ``DomainError`` naming the field."""
        unknown = sorted(set(config) - KNOWN_FIELDS)
        if unknown:
            raise DomainError("unknown field", field=f"target.{unknown[0]}")
        seed = config.get("seed")
        if problem := seed_problem(seed):
            raise DomainError(problem, field="target.seed")
        assert isinstance(seed, int)  # seed_problem refuses anything else
        per_case = config.get("pass_probability")
        per_case = {} if per_case is None else per_case
        if not isinstance(per_case, dict):
            raise DomainError("expected an object {case key: p}", field="target.pass_probability")
        for key, p in per_case.items():
            _probability(f"pass_probability.{key}", p)
        latency = config.get("latency_ms", 0)
        if isinstance(latency, list) and len(latency) == 2:
            low, high = (_non_negative("latency_ms", v) for v in latency)
            if low > high:
                raise DomainError("[low, high] with low ≤ high", field="target.latency_ms")
        else:
            low = high = _non_negative("latency_ms", latency)
        sleep = config.get("sleep", False)
        if not isinstance(sleep, bool):
            raise DomainError("expected true or false", field="target.sleep")
        wrong_outputs = config.get("wrong_outputs") or {}
        if not isinstance(wrong_outputs, dict):
            raise DomainError("expected an object {case key: [str]}", field="target.wrong_outputs")
        for key, outputs in wrong_outputs.items():
            if (
                not isinstance(outputs, list)
                or not outputs
                or not all(isinstance(o, str) for o in outputs)
            ):
                raise DomainError(
                    "expected a non-empty list of strings", field=f"target.wrong_outputs.{key}"
                )
        model = config.get("model", "simulated")
        if model != "simulated":
            raise DomainError("a simulated target's model is 'simulated'", field="target.model")
        return cls(
            seed=seed,
            pass_probability={str(k): float(v) for k, v in per_case.items()},
            default_pass_probability=_probability(
                "default_pass_probability", config.get("default_pass_probability", 0.5)
            ),
            error_probability=_probability(
                "error_probability", config.get("error_probability", 0.0)
            ),
            latency_ms=(low, high),
            sleep=sleep,
            wrong_outputs={str(k): tuple(v) for k, v in wrong_outputs.items()},
            concurrency=concurrency_read(config),
        )


def _probability(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise DomainError(
            f"expected a probability in [0, 1], got {value_shown(value)}", field=f"target.{name}"
        )
    return float(value)


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise DomainError(
            f"expected a number ≥ 0, got {value_shown(value)}", field=f"target.{name}"
        )
    return float(value)


def simulated_draw(seed: int, key: str, attempt: int, salt: str) -> float:
    """Uniform draw in [0, 1) from blake2b-64 of ``seed|key|attempt|salt``."""
    digest = hashlib.blake2b(f"{seed}|{key}|{attempt}|{salt}".encode(), digest_size=8).digest()
    return struct.unpack(">Q", digest)[0] / 2**64


def expected_text(expected: Any) -> str:
    """The passing output for ``expected``: the graders' reference form."""
    if isinstance(expected, str):
        return expected
    return json.dumps(expected, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def wrong_answer(expected: Any, *, key: str, attempt: int, u: float) -> str:
    """A plausible wrong answer for ``expected`` that the reference graders fail: a number grows
    by 100-200% of its magnitude (``u`` in [0, 1) picks how much; at least 1), so it fails
    ``math.isclose`` at any rel_tol < 0.5 and abs_tol < 1; an object loses its first key, a list
    its last element, a boolean is negated, an empty container becomes ``null``; other text
    becomes a stock non-answer (else ``WRONG-<key>-<attempt>``)."""
    if isinstance(expected, bool):
        return json.dumps(not expected)
    number = _as_number(expected)
    if number is not None:
        wrong = number + max(1.0, abs(number)) * (1.0 + u)
        if isinstance(expected, int) or (isinstance(expected, str) and number.is_integer()):
            whole = math.floor(wrong)
            return str(whole + 1 if whole == number else whole)
        return f"{wrong:.6g}"
    if isinstance(expected, dict):
        if not expected:
            return "null"
        first = sorted(expected)[0]
        return expected_text({k: v for k, v in expected.items() if k != first})
    if isinstance(expected, list):
        return expected_text(expected[:-1]) if expected else "null"
    if isinstance(expected, str):
        needle = expected.strip().casefold()
        for text in WRONG_TEXTS:
            if needle and needle not in text.casefold():
                return text
    return f"WRONG-{key}-{attempt}"


def _as_number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str):
        return parse_number(value)
    return None


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


class SimulatedTarget:
    """A deterministic fake pipeline."""

    kind = "simulated"

    def __init__(self, config: SimulatedConfig) -> None:
        self.config = config
        self.model: str | None = "simulated"
        self.concurrency = config.concurrency

    @classmethod
    def from_config(cls, config: dict) -> SimulatedTarget:
        """Build from a run's target snapshot; raises ``DomainError`` naming the field."""
        return cls(SimulatedConfig.parse(config))

    def pass_probability(self, key: str) -> float:
        return self.config.pass_probability.get(key, self.config.default_pass_probability)

    async def call(self, case: CaseInput) -> TargetResult:
        """One simulated trial, a pure function of (config, case, attempt)."""
        seed, key, attempt = self.config.seed, case.key, case.attempt
        low, high = self.config.latency_ms
        latency_ms = low + (high - low) * simulated_draw(seed, key, attempt, "latency")
        if self.config.sleep and latency_ms:
            await asyncio.sleep(latency_ms / 1000)
        prompt = expected_text(case.input)
        u_error = simulated_draw(seed, key, attempt, "error")
        u_pass = simulated_draw(seed, key, attempt, "pass")
        raw = {"simulated": True, "seed": seed, "u_error": u_error, "u_pass": u_pass}
        if u_error < self.config.error_probability:
            return TargetResult(
                output="",
                raw_response=raw,
                error=SIMULATED_ERROR,
                error_kind="simulated_error",
                model="simulated",
                latency_ms=latency_ms,
            )
        passed = u_pass < self.pass_probability(key)
        if case.expected is None:
            output = f"simulated answer for {key}"
        elif passed:
            output = expected_text(case.expected)
        elif key in self.config.wrong_outputs:
            choices = self.config.wrong_outputs[key]
            u_pick = simulated_draw(seed, key, attempt, "pick")
            output = choices[min(int(u_pick * len(choices)), len(choices) - 1)]
        else:
            u_size = simulated_draw(seed, key, attempt, "size")
            output = wrong_answer(case.expected, key=key, attempt=attempt, u=u_size)
        return TargetResult(
            output=output,
            raw_response={**raw, "intended": "pass" if passed else "fail"},
            input_tokens=_tokens(prompt),
            output_tokens=_tokens(output),
            model="simulated",
            latency_ms=latency_ms,
        )

    async def aclose(self) -> None:
        """Nothing to release."""

"""``assay-gate``: the CI gate over HTTP, with the exit codes of ``manage.py gate``.

    assay-gate --head RUN_OR_FILE [--base RUN_OR_FILE] [--alpha 0.05] [--json]
               [--max-errored-fraction F] [--allow-untrusted] [--allow-incomparable]
               [--top-up [--max-trials-per-case M] [--max-cost USD] [--timeout S]]
               [--url URL]

RUN_OR_FILE: a run UUID, ``"suite name/run name"`` (looked up through the API), or the
path of an ``export_run`` file (a file that exists, or a name ending in ``.json``), which is
sent in the request. Without ``--base`` the head suite's current baseline is used. The
server is ``--url`` or ``ASSAY_URL``; the token is ``ASSAY_TOKEN`` (never an argument, so
it stays out of CI logs).

Exit codes, those of ``manage.py gate`` (docs/ci.md):
0 no measurable regression; 1 regression; 2 cannot decide (the gate's own 2, a top-up
still running at ``--timeout``, and also a server that cannot be reached or answers
5xx: rerun); 3 bad arguments (an unknown run, an unreadable file, a 4xx answer such as a
bad ``--alpha``, no token, a token without the role). Never 0 or 1 without a decision.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

import httpx

from assay_client.client import AssayClient, is_uuid
from assay_client.errors import AssayError

# A decision's exit code is the server's (``decision.exit_code``, mapped from its verdict in
# one place there); this client maps only what happens before a decision: a server that
# cannot answer (2, rerun) and input it refuses (3).
CANNOT_DECIDE, BAD_INPUT = 2, 3
DECISION_CODES = frozenset({0, 1, 2})  # pass, regression, cannot decide


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 3 (bad arguments), never argparse's 2 (= cannot decide)."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(BAD_INPUT)


class BadInput(Exception):
    """An argument the gate cannot use (exit 3)."""


def parser_build() -> argparse.ArgumentParser:
    """The command line of ``assay-gate``."""
    parser = _Parser(
        prog="assay-gate",
        description="Gate a head run against a base run on an Assay server: "
        "exit 0 pass, 1 regression, 2 cannot decide, 3 bad arguments.",
    )
    parser.add_argument("--head", required=True, help="run UUID, 'suite/run' or a run file")
    parser.add_argument(
        "--base", help="run UUID, 'suite/run' or a run file (default: the suite's baseline)"
    )
    parser.add_argument("--alpha", type=float, help="level of the test, 1e-6 to 0.5 (0.05)")
    parser.add_argument(
        "--max-errored-fraction",
        type=float,
        help="errored trials allowed per run, as a fraction (default 0)",
    )
    parser.add_argument("--allow-untrusted", action="store_true", help="gate on provisional judges")
    parser.add_argument(
        "--allow-incomparable", action="store_true", help="test shared cases of unlike runs"
    )
    parser.add_argument(
        "--top-up",
        action="store_true",
        help="settle suspect cases with more trials of both runs (runs executed by the server)",
    )
    parser.add_argument("--max-trials-per-case", type=int, help="with --top-up: a side's cap")
    parser.add_argument("--max-cost", help="with --top-up: a cap in USD (a decimal string)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=3600.0,
        help="with --top-up: seconds to wait (default 3600; exit 2 after)",
    )
    parser.add_argument("--json", action="store_true", help="print the gate's JSON")
    parser.add_argument("--url", help="the Assay server (default: $ASSAY_URL)")
    return parser


def side_read(client: AssayClient, ref: str, side: str) -> dict[str, Any]:
    """The request fields of one side (``head``/``base``): ``{side: uuid}`` or
    ``{side + "_file": document}``. Raises ``BadInput`` (unreadable file, malformed
    reference) and ``AssayError`` (404: no such suite/run)."""
    path = Path(ref)
    if ref.endswith(".json") or path.is_file():
        try:
            return {f"{side}_file": json.loads(path.read_text(encoding="utf-8"))}
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            raise BadInput(f"--{side}: cannot read the run file {ref!r}: {exc}") from exc
    if is_uuid(ref):
        return {side: ref}
    suite, slash, run = ref.partition("/")
    if not slash or not suite.strip() or not run.strip():
        raise BadInput(f"--{side}: expected a run UUID, 'suite/run' or a run file, got {ref!r}")
    return {side: client.run_find(suite=suite.strip(), run=run.strip())["uuid"]}


def gate_request(client: AssayClient, options: argparse.Namespace) -> dict | None:
    """The gate's JSON for these options (after the top-up, with ``--top-up``); None
    when the top-up was still running at ``--timeout``."""
    body: dict[str, Any] = side_read(client, options.head, "head")
    if options.base:
        body.update(side_read(client, options.base, "base"))
    for name in ("alpha", "max_errored_fraction", "max_trials_per_case"):
        if getattr(options, name) is not None:
            body[name] = getattr(options, name)
    if options.max_cost is not None:
        body["max_cost_usd"] = options.max_cost
    for flag in ("allow_untrusted", "allow_incomparable", "top_up"):
        if getattr(options, flag):
            body[flag] = True
    answer = client.gate(**body)
    if options.top_up and "decision" not in answer:
        return client.top_up_wait(answer, timeout_s=options.timeout)
    return answer


def summary(answer: dict) -> str:
    """The decision first (its sentence), then the headline figures and the notes."""
    decision = answer["decision"]
    lines = [decision["sentence"]]
    headline = (answer.get("comparison") or {}).get("headline") or {}
    if headline.get("base_rate") is not None and headline.get("head_rate") is not None:
        p_text = str(headline.get("p_text"))
        lines.append(
            f"pass rate {headline['base_rate']:.1%} -> {headline['head_rate']:.1%} over "
            f"{headline.get('n_cases')} cases (two-sided p over every trial "
            f"{p_text if p_text.startswith(('<', '>')) else '= ' + p_text})"
        )
    said = decision["sentence"].casefold()
    lines += [
        f"- {reason}" for reason in decision.get("reasons") or [] if reason.casefold() != said
    ]
    lines += [f"note: {note}" for note in decision.get("notes") or [] if note]
    lines.append(f"exit {decision['exit_code']} ({decision.get('title', '')})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the gate; returns (and, as a console script, exits with) its exit code."""
    options = parser_build().parse_args(argv)
    try:
        with AssayClient(options.url) as client:
            answer = gate_request(client, options)
    except (BadInput, ValueError) as exc:
        print(f"assay-gate: {exc}", file=sys.stderr)
        return BAD_INPUT
    except AssayError as exc:
        print(f"assay-gate: {exc}", file=sys.stderr)
        return CANNOT_DECIDE if exc.status >= 500 else BAD_INPUT
    except httpx.HTTPError as exc:
        print(f"assay-gate: cannot decide: the server did not answer ({exc!r})", file=sys.stderr)
        return CANNOT_DECIDE
    if answer is None:
        print(
            f"assay-gate: cannot decide: the top-up was still running after "
            f"{options.timeout:g} s (it goes on: run the gate again later)",
            file=sys.stderr,
        )
        return CANNOT_DECIDE
    print(json.dumps(answer, indent=2) if options.json else summary(answer))
    code = answer["decision"]["exit_code"]
    # A decision outside the documented codes is not a pass.
    return code if code in DECISION_CODES else CANNOT_DECIDE


if __name__ == "__main__":
    sys.exit(main())

"""``manage.py run_experiment FILE [NAME] [--settle ROUNDS] [--timeout S] [--json]``: start an
experiment declared in a config file (``[experiments.NAME]``, the file applied first) or in a
JSON file (the API's body; ``suite`` a name or UUID), wait for every variant run (and the
racing with ``--settle``), print the decision and exit with what it says.

Exit codes (docs/experiments.md): 0 decided (one variant is the best), 1 finished undecided
(several could be the best: the sentence says what would settle it), 2 bad input (nothing
started), 3 a variant run failed or was cancelled, the racing failed, or ``--timeout`` passed
(the decision is printed when there is one)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from core.commands import DomainCommand
from core.ids import uuid_parse
from evals.experiments.decision import experiment_decision, experiment_variants
from evals.experiments.racing import (
    ROUNDS_MAX,
    RUNNING,
    TRIALS_PER_ROUND_MAX,
    experiment_settle_start,
)
from evals.experiments.render import experiment_json, experiment_ready
from evals.experiments.spec import experiment_spec_start
from evals.models import Experiment, Run, Suite
from interop.config import config_document_read, config_experiment_start

EXIT_DECIDED, EXIT_UNDECIDED, EXIT_BAD_INPUT, EXIT_NOT_FINISHED = 0, 1, 2, 3
POLL_S = 0.2  # seconds between looks at the variant runs while waiting


def _bad(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_BAD_INPUT)


class Command(DomainCommand):
    help = (
        "Start an experiment from a config file's [experiments.NAME] (or a JSON file), wait, "
        "print the decision. Exit 0 decided, 1 undecided (several variants could be the "
        "best), 2 bad input, 3 a variant run failed or was cancelled, the racing failed, or "
        "the timeout passed (docs/experiments.md)."
    )
    domain_error_exit = EXIT_BAD_INPUT
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE", help="a TOML config file, or a .json spec")
        parser.add_argument(
            "name", metavar="NAME", nargs="?", help="the experiment of the TOML file to start"
        )
        parser.add_argument(
            "--settle",
            metavar="ROUNDS",
            type=int,
            default=0,
            help=f"once every run has finished, race: up to ROUNDS (1..{ROUNDS_MAX}) rounds of "
            "more trials to the variants still in the set",
        )
        parser.add_argument(
            "--trials-per-round",
            type=int,
            default=5,
            help="trials added per sampled case and variant each round "
            f"(1..{TRIALS_PER_ROUND_MAX}; default 5)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=3600.0,
            help="seconds to wait for the runs and the racing (default 3600); then exit 3",
        )
        parser.add_argument("--json", action="store_true", help="print the experiment as JSON")

    def handle(self, *args: Any, **opts: Any) -> None:
        experiment = self._start(opts)
        deadline = time.monotonic() + opts["timeout"]
        finished = _wait(experiment, deadline)
        if finished and opts["settle"]:
            variants = experiment_variants(experiment=experiment)
            if all(v.run.status != Run.Status.CANCELLED for v in variants):
                experiment_settle_start(
                    experiment=experiment,
                    rounds=opts["settle"],
                    trials_per_round=opts["trials_per_round"],
                )
                finished = _wait(experiment, deadline)
        experiment = Experiment.objects.select_related("suite").get(id=experiment.id)
        variants = experiment_variants(experiment=experiment)
        decision = None
        if experiment_ready(variants):
            decision = experiment_decision(experiment=experiment)
        code = _exit_code(experiment, variants, decision, timed_out=not finished)
        data = experiment_json(experiment, variants, decision=decision)
        data["exit_code"] = code
        if not finished:
            data["timed_out"] = opts["timeout"]
        if opts["json"]:
            self.stdout.write(json.dumps(data, ensure_ascii=False, allow_nan=False))
        else:
            self._print(data)
            if not finished:
                self.stdout.write(f"timed out after {opts['timeout']} s: runs are still going")
        if code:
            sys.exit(code)

    def _start(self, opts: dict) -> Experiment:
        path = Path(opts["file"])
        if opts["settle"] and not 1 <= opts["settle"] <= ROUNDS_MAX:
            raise _bad(f"--settle: from 1 to {ROUNDS_MAX} rounds (got {opts['settle']})")
        if not 1 <= opts["trials_per_round"] <= TRIALS_PER_ROUND_MAX:
            raise _bad(f"--trials-per-round: from 1 to {TRIALS_PER_ROUND_MAX}")
        if path.suffix == ".json":
            if opts["name"]:
                raise _bad("NAME: a JSON file names its experiment in its 'name' field")
            try:
                spec = json.loads(path.read_text(encoding="utf-8-sig"))
            except (OSError, ValueError) as exc:
                raise _bad(f"{path}: {exc}") from exc
            if not isinstance(spec, dict):
                raise _bad(f"{path}: expected a JSON object")
            suite = _suite_get(spec.pop("suite", None))
            return experiment_spec_start(spec=spec, suite=suite)
        if not opts["name"]:
            raise _bad("NAME: which [experiments.NAME] of the file to start")
        try:
            document = config_document_read(path)
        except (OSError, ValueError) as exc:
            raise _bad(f"{path}: {exc}") from exc
        return config_experiment_start(
            document=document, name=opts["name"], base_dir=path.resolve().parent
        )

    def _print(self, data: dict) -> None:
        self.stdout.write(
            f"experiment {data['name']} ({data['uuid']}): {len(data['variants'])} variants"
        )
        decision = data["decision"]
        figures = {v["label"]: v for v in decision["variants"]} if decision else {}
        for v in data["variants"]:
            p = v["progress"]
            line = f"  {v['label']}: run {v['run']} {v['status']}, "
            line += f"{p['finished']}/{p['planned']} trials"
            f = figures.get(v["label"])
            if f and f["estimate"] is not None:
                interval = "" if f["low"] is None else f" [{f['low']:.3f}, {f['high']:.3f}]"
                line += f"; {f['estimate']:.3f}{interval}"
                line += "; in the set" if f["in_set"] else f"; out: {f['out_reason']}"
            self.stdout.write(line)
        if data["racing"]:
            r = data["racing"]
            self.stdout.write(
                f"racing: {r['status']}, {len(r['looks'])} look(s) {r['error']}".rstrip()
            )
        if decision is None:
            return
        self.stdout.write(f"best set: {', '.join(decision['best'])}")
        self.stdout.write(decision["sentence"])
        if decision["cheapest"]:
            cheapest = f"cheapest in the set: {decision['cheapest']}"
            self.stdout.write(f"{cheapest} {decision['cheapest_reason']}".rstrip())
        for note in decision["notes"]:
            self.stdout.write(f"note: {note}")
        self.stdout.write(f"method: {decision['method']} (alpha {decision['alpha']})")


def _suite_get(ref: object) -> Suite:
    if not isinstance(ref, str) or not ref:
        raise _bad("suite: required, a suite's name or UUID")
    suite = Suite.objects.filter(name=ref).first()
    if suite is None and (ref_uuid := uuid_parse(ref)) is not None:
        suite = Suite.objects.filter(uuid=ref_uuid).first()
    if suite is None:
        raise _bad(f"suite: no suite named {ref[:100]!r}")
    return suite


def _wait(experiment: Experiment, deadline: float) -> bool:
    """Wait until every variant run has finished and no racing runs; False at ``deadline``."""
    while True:
        experiment.refresh_from_db(fields=["racing", "racing_look"])
        variants = experiment_variants(experiment=experiment)
        racing = experiment.racing.get("status") == RUNNING if experiment.racing else False
        if experiment_ready(variants) and not racing:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def _exit_code(experiment: Experiment, variants, decision, *, timed_out: bool) -> int:
    """The module's exit codes."""
    if timed_out or decision is None:
        return EXIT_NOT_FINISHED
    if any(v.run.status != Run.Status.SUCCEEDED for v in variants):
        return EXIT_NOT_FINISHED
    if experiment.racing and experiment.racing.get("status") != "done":
        return EXIT_NOT_FINISHED
    return EXIT_DECIDED if decision.decided else EXIT_UNDECIDED

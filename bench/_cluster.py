"""A small production-like cluster for the worker benchmarks: the shared mock LLM, a fresh
PostgreSQL database, Redis as the broker, and Celery worker (and beat) processes started and
killed by id. Used by the worker benchmarks (bench_workers.py, bench_recovery.py, ...) and,
for the mock, by peers/bench_peers.py; not a test fixture.

Each benchmark process is the "web" side: it starts runs with ``run_start`` (Celery not
eager; messages through the outbox to Redis) and polls the database, as a page would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_MOCK = ROOT.parent / "shared" / "tools" / "mockllm" / "server.py"
CASES, TRIALS = 200, 5
MOCK_SEED = 1234


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http(url: str, method: str = "GET") -> dict:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def group_stop(process: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group of ``process`` (started with its own session), then SIGKILL
    when it has not ended within ``timeout`` seconds; a group already gone is left alone."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        except ProcessLookupError:
            pass


class Mock:
    """The shared mock at ``latency_ms``, no jitter, seed ``MOCK_SEED``, in its own process
    group (``extra``: more of its options, e.g. ``--rpm``), run by ``python`` on ``port`` (0:
    a free one); ``base_url`` ends in /v1."""

    def __init__(
        self,
        mock_path: str,
        latency_ms: int = 200,
        extra: tuple = (),
        *,
        python: str = sys.executable,
        port: int = 0,
    ) -> None:
        self.port = port or free_port()
        self.process = subprocess.Popen(
            [python, str(mock_path), "--port", str(self.port), "--latency-ms",
             str(latency_ms), "--jitter-ms", "0", "--seed", str(MOCK_SEED), *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        self.admin = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.admin}/v1"
        for _ in range(300):
            try:
                http(f"{self.admin}/health")
                return
            except OSError:
                time.sleep(0.05)
        group_stop(self.process)
        raise RuntimeError("the mock did not start")

    def target(self, *, provider: str = "openai", **extra: object) -> dict:
        """A model target for ``run_start`` that calls this mock on ``provider``'s endpoint
        (``PROVIDER_TARGETS``): model ``mock-model``, prompt ``$input``, a 30 s timeout;
        ``extra`` keys added (``concurrency``, ``rpm``, ``limit_key``) or replacing those."""
        return {
            "kind": "openai",
            "base_url": self.base_url,
            "model": "mock-model",
            "prompt_template": "$input",
            "timeout_s": 30.0,
            **PROVIDER_TARGETS[provider],
            **extra,
        }

    def stats(self) -> dict:
        return http(f"{self.admin}/admin/stats")

    def api_stats(self, provider: str) -> dict:
        """``/admin/stats`` of ``provider``'s endpoint alone (``by_api``): ``requests``,
        ``status``."""
        return self.stats()["by_api"][PROVIDER_APIS[provider]]

    def reset(self) -> None:
        http(f"{self.admin}/admin/reset", "POST")

    def stop(self) -> None:
        group_stop(self.process)


# What a target adds to speak each provider to the mock (docs/providers/): Anthropic's
# Messages API needs ``max_tokens``; the mock checks no key unless told, so none is sent.
PROVIDER_TARGETS: dict[str, dict] = {
    "openai": {},
    "anthropic": {"provider": "anthropic", "api_key_env": None, "settings": {"max_tokens": 64}},
}
# The mock's ``by_api`` name of each provider's endpoint.
PROVIDER_APIS = {"openai": "openai", "anthropic": "anthropic"}


def environment(database: str | None, redis_url: str, extra: dict | None = None) -> dict:
    """The environment of this process and of the workers it starts. ``database`` None and
    ``redis_url`` "" give the embedded default: SQLite and the filesystem broker, both under
    a fresh ``ASSAY_VAR_DIR``."""
    var = tempfile.mkdtemp(prefix="assay-bench-cluster-")
    database_url = (
        f"postgres://postgres@127.0.0.1:5432/{database}"
        if database
        else f"sqlite:///{var}/db.sqlite3"
    )
    env = {
        "DEBUG": "false",
        "SECRET_KEY": "bench-only-" + "x" * 40,
        "ASSAY_VAR_DIR": var,
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "PYTHONPATH": str(ROOT),
        **(extra or {}),
    }
    os.environ.update(env)
    return env


def database_fresh(database: str | None) -> None:
    """Drop and create PostgreSQL ``database`` (None: the SQLite file of ``environment``),
    then migrate it (Django set up in this process)."""
    if database:
        subprocess.run(
            ["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists", database], check=True
        )
        subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", database], check=True)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def suite_make(name: str = "bench", cases: int = CASES):
    """``cases`` cases carrying the mock's marker, p spread evenly over [0.40, 0.90] (200
    cases: 653 of 1,000 pass at 5 trials, seed 1234; 2,000: 6,539 of 10,000)."""
    from evals.models import Case, Suite

    suite = Suite.objects.create(name=name)
    Case.objects.bulk_create(
        Case(
            suite=suite,
            key=f"c{i + 1:05d}",
            input=f"Answer the question. [case=c{i + 1:05d} p={0.40 + 0.50 * i / (cases - 1)!r} "
            f"expect=ANSWER-c{i + 1:05d}]",
            expected=f"ANSWER-c{i + 1:05d}",
            content_hash=f"{i:064d}",
        )
        for i in range(cases)
    )
    return suite


class Workers:
    """Celery processes of this benchmark, each started alone (``--pool solo``) and stopped
    or killed by its own process id."""

    def __init__(self, env: dict, queue: str, log_dir: Path) -> None:
        self.env = {**os.environ, **env}
        self.queue = queue
        self.log_dir = log_dir
        self.processes: list[subprocess.Popen] = []

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen:
        log = (self.log_dir / f"{name}.log").open("wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "config", *args],
            cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self.processes.append(process)
        return process

    def worker(self, n: int) -> subprocess.Popen:
        name = f"w{n}-{self.queue}"
        process = self._spawn(
            ["worker", "--pool", "solo", "--queues", self.queue, "--loglevel", "INFO",
             "--without-heartbeat", "--without-gossip", "--without-mingle",
             "--hostname", f"{name}@%h"],
            name,
        )  # fmt: skip
        log = self.log_dir / f"{name}.log"
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes():
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"worker {name} did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.1)
        return process

    def beat(self) -> subprocess.Popen:
        schedule = self.log_dir / "beat-schedule"
        return self._spawn(
            ["beat", "--schedule", str(schedule), "--loglevel", "INFO"], f"beat-{self.queue}"
        )

    def kill(self, process: subprocess.Popen) -> None:
        """SIGKILL the process group of one worker: no warm shutdown, nothing acknowledged."""
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        self.processes.clear()


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())

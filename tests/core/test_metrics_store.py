"""core.metrics.store: a dead process's counters are folded into the archive, so a total never
falls, and a live process's files are left alone."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.parser import text_string_to_metric_families

from core.metrics.store import metrics_compact, pid_alive

WRITER = textwrap.dedent(
    """
    from prometheus_client import Counter, Histogram
    c = Counter("t_jobs", "jobs", ["kind"])
    h = Histogram("t_wait_seconds", "waits", buckets=(0.1, 1.0))
    c.labels("a").inc({n})
    c.labels("b").inc(1)
    h.observe(0.05)
    h.observe(0.5 * {n})
    """
)


def _write(folder: Path, n: int) -> None:
    """A process that counts and exits (its pid is then dead)."""
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(folder)}
    subprocess.run([sys.executable, "-c", WRITER.format(n=n)], env=env, check=True, timeout=20)


def _samples(folder: Path) -> dict[tuple, float]:
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_it_folds_dead_processes_files_keeping_every_total(tmp_path):
    _write(tmp_path, 2)
    _write(tmp_path, 3)
    before = _samples(tmp_path)
    assert before[("t_jobs_total", (("kind", "a"),))] == 5.0
    assert len(list(tmp_path.glob("counter_*.db"))) == 2

    assert metrics_compact(tmp_path) == 4  # two counter files, two histogram files

    assert _samples(tmp_path) == before
    assert sorted(p.name for p in tmp_path.glob("*.db")) == [
        "counter_archive.db",
        "histogram_archive.db",
    ]
    # A later death is folded into the same archive, which still adds up.
    _write(tmp_path, 1)
    metrics_compact(tmp_path)
    after = _samples(tmp_path)
    assert after[("t_jobs_total", (("kind", "a"),))] == 6.0
    assert after[("t_jobs_total", (("kind", "b"),))] == 3.0
    assert after[("t_wait_seconds_count", ())] == 6.0
    assert after[("t_wait_seconds_bucket", (("le", "0.1"),))] == 3.0
    # 0.05 three times; 0.5 × n for n = 2, 3, 1: 1.0 and 0.5 within 1 s, 1.5 above it.
    assert after[("t_wait_seconds_bucket", (("le", "1.0"),))] == 5.0
    assert after[("t_wait_seconds_bucket", (("le", "+Inf"),))] == 6.0


def test_it_leaves_a_live_processes_files_alone(tmp_path):
    (tmp_path / f"counter_{os.getpid()}.db").write_bytes(b"")
    assert pid_alive(os.getpid())
    assert metrics_compact(tmp_path) == 0
    assert (tmp_path / f"counter_{os.getpid()}.db").exists()

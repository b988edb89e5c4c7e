"""The folder of every process's counters and histograms (prometheus_client's multiprocess
mode: one file per type and pid under ``PROMETHEUS_MULTIPROC_DIR``, which
``config.settings`` sets under ``ASSAY_VAR_DIR`` unless the environment names one).

A dead process's files would pile up with every worker restart, yet deleting them would
make the totals go down (read by Prometheus as a counter reset). ``metrics_compact`` folds
the files of dead pids into one archive file per type, so a total never falls; it runs under
an exclusive lock, and every scrape reads under a shared one, so no scrape sees a file both
in the archive and on its own. Pids are checked on this machine: the folder is per machine
(workers elsewhere have their own)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client.mmap_dict import MmapedDict, mmap_key
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

# The types whose values add up across processes (gauges are not written by workers).
SUMMED_TYPES = ("counter", "histogram", "summary")
ARCHIVE = "archive"
LOCK_FILE = ".lock"


def metrics_dir() -> Path:
    """The multiprocess folder (``PROMETHEUS_MULTIPROC_DIR``). Raises RuntimeError when unset
    (``config.settings`` always sets it)."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not folder:
        raise RuntimeError("PROMETHEUS_MULTIPROC_DIR is not set (config.settings sets it)")
    return Path(folder)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this machine (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _file_pid(path: Path) -> int | None:
    """The pid in ``<type>_<pid>.db`` (None for the archive or a name of another shape)."""
    tail = path.stem.rsplit("_", 1)[-1]
    return int(tail) if tail.isdigit() else None


@contextmanager
def _locked(folder: Path, mode: int) -> Iterator[None]:
    with (folder / LOCK_FILE).open("a") as lock:
        fcntl.flock(lock, mode)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def metrics_read_lock(folder: Path) -> Iterator[None]:
    """Held (shared) while a scrape reads ``folder``'s files."""
    with _locked(folder, fcntl.LOCK_SH):
        yield


def metrics_compact(folder: Path) -> int:
    """Fold the counter, histogram and summary files of dead pids into ``<type>_archive.db``
    (values summed, histogram buckets kept per bucket) and delete them; remove dead pids'
    live gauges. Returns how many files were folded. Safe to run from several processes at
    once (an exclusive lock; a second caller finds nothing left)."""
    dead = [
        path
        for path in folder.glob("*.db")
        if (pid := _file_pid(path)) is not None and not pid_alive(pid)
    ]
    if not dead:
        return 0
    folded = 0
    with _locked(folder, fcntl.LOCK_EX):
        for kind in SUMMED_TYPES:
            files = [p for p in dead if p.name.startswith(f"{kind}_") and p.exists()]
            if files:
                _fold(folder, kind, files)
                folded += len(files)
        for path in dead:
            if path.name.startswith("gauge_live"):
                pid = _file_pid(path)
                if pid is not None:
                    mark_process_dead(pid, str(folder))
    return folded


def _fold(folder: Path, kind: str, files: list[Path]) -> None:
    """Write the archive of ``kind`` as its old self plus ``files`` (to a new file renamed over
    the old), then delete ``files``."""
    archive = folder / f"{kind}_{ARCHIVE}.db"
    sources = [str(p) for p in files] + ([str(archive)] if archive.exists() else [])
    merged = MultiProcessCollector.merge(sources, accumulate=False)
    partial = folder / f".{kind}_{ARCHIVE}.partial"
    partial.unlink(missing_ok=True)
    store = MmapedDict(str(partial))
    try:
        for metric in merged:
            for sample in metric.samples:
                key = mmap_key(
                    metric.name,
                    sample.name,
                    list(sample.labels),
                    list(sample.labels.values()),
                    metric.documentation,
                )
                store.write_value(key, sample.value, 0.0)
    finally:
        store.close()
    partial.replace(archive)
    for path in files:
        path.unlink(missing_ok=True)

"""`manage.py demo` notices a dead worker: it prints a warning and starts a new one."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

from demo.management.commands import demo as demo_command


def _command() -> demo_command.Command:
    command = demo_command.Command(stdout=io.StringIO(), stderr=io.StringIO())
    command._stopping = threading.Event()
    return command


def _wait(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def test_a_dead_worker_is_reported_and_replaced(monkeypatch):
    monkeypatch.setattr(demo_command, "WATCH_SECONDS", 0.05)
    command = _command()
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    dead.wait(timeout=10)
    command._worker, command._worker_started = dead, time.monotonic() - 3600
    replacements = []

    def start_worker():
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        replacements.append(process)
        command._worker_started = time.monotonic()
        return process

    monkeypatch.setattr(command, "_start_worker", start_worker)
    watchdog = threading.Thread(target=command._watch_worker)
    watchdog.start()
    try:
        assert _wait(lambda: replacements)
        time.sleep(0.3)  # a live worker is left alone
    finally:
        command._stopping.set()
        watchdog.join(timeout=10)
        for process in replacements:
            process.kill()
            process.wait(timeout=10)
    assert len(replacements) == 1 and command._worker is replacements[0]
    assert "the Celery worker exited (code 3); starting a new one" in command.stderr.getvalue()


def test_a_worker_that_dies_right_after_its_start_is_not_restarted_in_a_loop(monkeypatch):
    monkeypatch.setattr(demo_command, "WATCH_SECONDS", 0.05)
    command = _command()
    dead = subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])
    dead.wait(timeout=10)
    command._worker, command._worker_started = dead, time.monotonic()  # just started
    started = []
    monkeypatch.setattr(command, "_start_worker", lambda: started.append(1) or dead)
    watchdog = threading.Thread(target=command._watch_worker)
    watchdog.start()
    assert _wait(lambda: "exited" in command.stderr.getvalue())
    time.sleep(0.3)
    command._stopping.set()  # during its minute of waiting: it stops without a restart
    watchdog.join(timeout=10)
    assert not watchdog.is_alive() and started == []


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"  # a zombie is gone
    except FileNotFoundError:
        return False


def test_the_dead_workers_embedded_beat_does_not_outlive_it(monkeypatch):
    """A worker killed with kill -9 leaves its embedded beat (a child in its process group)
    running; the watchdog ends that group before starting the new worker, so two beats never
    run at once."""
    monkeypatch.setattr(demo_command, "WATCH_SECONDS", 0.05)
    command = _command()
    script = (
        "import subprocess, sys; "
        "beat = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print(beat.pid, flush=True); raise SystemExit(9)"
    )
    dead = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    beat_pid = int(dead.stdout.readline())
    dead.wait(timeout=10)
    assert _alive(beat_pid)  # the orphan, as after kill -9 of a real worker
    command._worker, command._worker_started = dead, time.monotonic() - 3600
    replacements = []

    def start_worker():
        process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        replacements.append(process)
        return process

    monkeypatch.setattr(command, "_start_worker", start_worker)
    watchdog = threading.Thread(target=command._watch_worker)
    watchdog.start()
    try:
        assert _wait(lambda: replacements)
        assert _wait(lambda: not _alive(beat_pid))
    finally:
        command._stopping.set()
        watchdog.join(timeout=10)
        for process in replacements:
            process.kill()
            process.wait(timeout=10)

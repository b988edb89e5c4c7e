"""Logins during a large import on the embedded default (SQLite, WAL): locked, or waiting?

One process imports a generated CSV of --rows rows (``results_import``: one transaction,
which holds SQLite's write lock until it commits) while another logs a user in every
second with Django's test client (a session row and ``last_login``: two writes), on the same
SQLite file, with the busy timeout given by --timeout (seconds; config/settings.py reads
ASSAY_SQLITE_TIMEOUT_SECONDS). Prints the import's time, the logins made, how many failed
with "database is locked", and the slowest login.

    python bench/bench_import_lock.py --rows 200000 --timeout 30
    python bench/bench_import_lock.py --rows 200000 --timeout 180
"""

from __future__ import annotations

import argparse
import csv
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parent.parent


def _django(var_dir: str, timeout: int) -> None:
    os.environ.update(
        DEBUG="true",
        DJANGO_SETTINGS_MODULE="config.settings",
        ASSAY_VAR_DIR=var_dir,
        DATABASE_URL=f"sqlite:///{var_dir}/bench.sqlite3",
        ASSAY_SQLITE_TIMEOUT_SECONDS=str(timeout),
    )
    os.environ.pop("REDIS_URL", None)
    sys.path.insert(0, str(PROJECT))
    import django

    django.setup()


def _import(var_dir: str, timeout: int, path: str, out) -> None:
    _django(var_dir, timeout)
    from interop.importers import results_import

    began = time.perf_counter()
    with open(path, "rb") as stream:
        summary = results_import(stream=stream, filename="big.csv", suite_name="big", run_name="r")
    out.put(("import", time.perf_counter() - began, summary.trials))


def _logins(var_dir: str, timeout: int, done, out) -> None:
    _django(var_dir, timeout)
    from django.db import OperationalError, connection
    from django.test import Client

    made, locked, slowest = 0, 0, 0.0
    while not done.is_set():
        began = time.perf_counter()
        try:
            Client().login(username="bench", password="bench-password")
            made += 1
        except OperationalError as error:
            if "locked" not in str(error):
                raise
            locked += 1
            connection.close()
        slowest = max(slowest, time.perf_counter() - began)
        time.sleep(1.0)
    out.put(("logins", made, locked, slowest))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--timeout", type=int, default=180, help="SQLite busy timeout, s")
    args = parser.parse_args()
    var_dir = tempfile.mkdtemp(prefix="assay-bench-lock-")
    _django(var_dir, args.timeout)
    from django.contrib.auth.models import User
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    User.objects.create_user("bench", password="bench-password")
    path = Path(var_dir) / "big.csv"
    with path.open("w", newline="") as stream:
        writer = csv.writer(stream)
        writer.writerow(["case_id", "attempt", "input", "output", "expected", "passed"])
        for i in range(args.rows):
            case = i // 5
            writer.writerow(
                [
                    f"c{case:06d}",
                    i % 5 + 1,
                    f"question {case}",
                    f"answer {i}",
                    f"e{case}",
                    "true" if i % 2 == 0 else "false",
                ]
            )
    spawn = multiprocessing.get_context("spawn")
    out, done = spawn.Queue(), spawn.Event()
    logins = spawn.Process(target=_logins, args=(var_dir, args.timeout, done, out))
    logins.start()
    time.sleep(2)
    importer = spawn.Process(target=_import, args=(var_dir, args.timeout, str(path), out))
    importer.start()
    results = {}
    item = out.get()  # the import's result (or the login loop's, if it failed first)
    results[item[0]] = item[1:]
    done.set()
    item = out.get(timeout=600)
    results[item[0]] = item[1:]
    importer.join()
    logins.join()
    seconds, trials = results["import"]
    made, locked, slowest = results["logins"]
    print(
        f"busy timeout {args.timeout} s: import of {trials} rows {seconds:.1f} s; "
        f"logins {made} ok, {locked} 'database is locked', slowest {slowest:.1f} s"
    )


if __name__ == "__main__":
    main()

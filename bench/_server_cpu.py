"""CPU time of the PostgreSQL backend serving this process's connection, read from
``/proc`` (the server runs on the same machine in these benchmarks), so a figure can say
how much CPU a request cost in all (this process plus the database) apart from the time
spent waiting for a core on a loaded machine. Import after ``django.setup()``."""

from __future__ import annotations

import os

from django.db import connection


def db_cpu_ms() -> float | None:
    """Total CPU (user + system, ms) used so far by the PostgreSQL backend of Django's
    default connection; None on SQLite (its work is this process's own CPU) or when the
    backend's ``/proc`` entry cannot be read (a server on another machine). Resolution:
    one clock tick (10 ms), so take differences over several requests."""
    if connection.vendor != "postgresql":
        return None
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        pid = cursor.fetchone()[0]
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")

"""Summarise a soak_embedded.py results file, finished or not, as a bench/README.md row.

    python bench/soak_summary.py bench/soak_results.jsonl

Reads the per-minute lines (the summary line too when present) and prints: minutes
recorded, span, runs started and finished by status, late runs, minutes with no worker
process, worker restarts, longest heartbeat age, minutes with the banner shown or the API
not answering, broker messages set aside, slowest API answer, and the summary's finish
times when the soak ended.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/soak_results.jsonl")
    minutes, summary, start, errors = [], None, None, []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if "minute" in record:
            minutes.append(record)
        elif "summary" in record:
            summary = record["summary"]
        elif "start" in record:
            start = record
        elif "error" in record:
            errors.append(record)
    if not minutes:
        print("no minute recorded yet")
        return
    last = minutes[-1]
    ages = [m["heartbeat_age_s"] for m in minutes if m["heartbeat_age_s"] is not None]
    web = [m["web_ms"] for m in minutes if m["web_ms"] is not None]
    print(f"file: {path}; started {start['start'] if start else '?'}, last minute {last['at']}")
    print(f"minutes recorded: {len(minutes)}")
    print(f"runs started: {sum(1 for m in minutes if m['started'])}, by status now: {last['runs']}")
    print(f"start errors: {sum(1 for m in minutes if m['start_error'])}")
    print(f"late runs at the last minute: {len(last['late'])}")
    print(f"minutes without a worker process: {sum(1 for m in minutes if not m['worker_alive'])}")
    print(f"worker restarts by make demo: {last['worker_restarts']}")
    print(f"longest heartbeat age: {max(ages) if ages else None} s")
    print(f"minutes with the no-worker banner: {sum(1 for m in minutes if m.get('banner'))}")
    print(f"minutes the API failed: {sum(1 for m in minutes if not m['web_ok'])}")
    print(f"slowest API answer: {max(web) if web else None} ms")
    print(f"broker messages set aside: {last['broker_set_aside']}")
    print(f"mock calls: {last['mock_requests']}")
    print(f"demo process alive at the end: {last['demo_alive']}")
    if summary:
        print(f"summary: {json.dumps(summary)}")
    for error in errors:
        print(f"error: {json.dumps(error)}")


if __name__ == "__main__":
    main()

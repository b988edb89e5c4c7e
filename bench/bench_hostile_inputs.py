"""Hostile inputs on every path: each oversized or malformed input a tester sent, once, with
the answer, the time it took and how much the server's peak memory rose.

Usage (SQLite, a throwaway file under /tmp; loopback only):
    .venv/bin/python bench/bench_hostile_inputs.py

1. Migrates a fresh database; creates carol (engineer) and bob (reviewer) with API tokens
   and a suite of one case.
2. Starts the server (``bench/_server.py``: gunicorn, here ONE worker, gthread with 4
   threads, so that one process serves everything and parallel requests share it; the
   worker's peak RSS is the figure).
3. For each HTTP case: the worker's peak RSS is reset to its current RSS (``clear_refs``,
   Linux), the request is sent over a raw socket (the body in 64 KiB pieces, stopping as
   soon as the server answers: a refused body is not pushed in whole), and the answer's
   status, the seconds to it, and ``VmHWM - VmRSS before`` are recorded. Parallel cases
   send their requests at once and record the rise over all of them.
4. For each command case (``apply_config``, ``run_suite``): a fresh process sets Django up,
   resets its own peak RSS, runs the command once and reports the same three figures
   (Django's start-up is not counted).
Each case runs once; every socket has a 60 s timeout. Targets: a clear 4xx (a form shows
its error on the page, 200, as every form here does; a command exits non-zero with a
plain message), under 1 s, under 100 MB of peak RSS each.
"""

from __future__ import annotations

import json
import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_WORKERS", "1")
os.environ.setdefault("BENCH_WORKER_CLASS", "gthread")
os.environ.setdefault("BENCH_THREADS", "4")
from _server import bench_env, database_fresh, server_label, server_start, server_stop  # noqa: E402

PORT = int(os.environ.get("BENCH_PORT", "8791"))
PASSWORD = "bench-password-123"
MIB = 1024 * 1024
ADVICE = "set_int_max_str_digits"
TIMEOUT = 60.0


# --- the server's worker and its memory ------------------------------------------------------


def worker_pid(master: int) -> int:
    """The pid of the gunicorn worker forked by ``master``."""
    for path in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = path.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == master:
            return int(path.parent.name)
    raise RuntimeError("no gunicorn worker found")


def status_kib(pid: int | str, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise KeyError(key)


def peak_reset(pid: int | str) -> int:
    """Reset ``pid``'s peak RSS (VmHWM) to its current RSS; returns that RSS in KiB."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return status_kib(pid, "VmRSS")


# --- HTTP over a raw socket ------------------------------------------------------------------


def http(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """Send one request to the server; stop sending the body once the server answers (a
    refused body is not pushed in whole). Returns (status, response body)."""
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    if method == "POST":
        head.append(f"Content-Length: {len(body)}")
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
    view = memoryview(body)
    try:
        for start in range(0, len(body), 64 * 1024):
            if select.select([sock], [], [], 0)[0]:
                break  # the server answered already
            sock.sendall(view[start : start + 64 * 1024])
    except (BrokenPipeError, ConnectionResetError):
        pass
    data = b""
    try:
        while chunk := sock.recv(1 << 16):
            data += chunk
    except ConnectionResetError:
        pass
    sock.close()
    if not data:
        return 0, b"(connection reset, no answer)"
    head_end = data.find(b"\r\n\r\n")
    status = int(data.split(b" ", 2)[1])
    rest = data[head_end + 4 :]
    if b"transfer-encoding: chunked" in data[:head_end].lower():
        rest = _unchunk(rest)
    return status, rest


def _unchunk(data: bytes) -> bytes:
    out, pos = b"", 0
    while True:
        end = data.find(b"\r\n", pos)
        if end < 0:
            return out
        size = int(data[pos:end].split(b";")[0] or b"0", 16)
        if size == 0:
            return out
        out += data[end + 2 : end + 2 + size]
        pos = end + 2 + size + 2


class Browser:
    """A logged-in browser session (session cookie + CSRF cookie and header)."""

    def __init__(self, username: str) -> None:
        csrf = "b" * 32  # an unmasked secret, sent as both cookie and header
        status, _ = http("GET", "/accounts/login/")
        body = f"username={username}&password={PASSWORD}&csrfmiddlewaretoken={csrf}".encode()
        sock_headers = {
            "Cookie": f"csrftoken={csrf}",
            "Content-Type": "application/x-www-form-urlencoded",
        }
        self.csrf = csrf
        self.session = _login(body, sock_headers)

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        return http(
            "POST",
            path,
            body,
            {
                "Cookie": f"csrftoken={self.csrf}; sessionid={self.session}",
                "X-CSRFToken": self.csrf,
                "Content-Type": "application/x-www-form-urlencoded",
            },
        )


def _login(body: bytes, headers: dict[str, str]) -> str:
    sock = socket.create_connection(("127.0.0.1", PORT), timeout=TIMEOUT)
    head = ["POST /accounts/login/ HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()] + [f"Content-Length: {len(body)}"]
    sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    data = b""
    while chunk := sock.recv(1 << 16):
        data += chunk
    sock.close()
    match = re.search(rb"sessionid=([^;]+);", data)
    if match is None:
        raise RuntimeError(f"login failed: {data[:300]!r}")
    return match.group(1).decode()


# --- the data --------------------------------------------------------------------------------


def setup_data() -> dict[str, str]:
    """Fresh database, carol (engineer) and bob (reviewer) with tokens, a suite "s" of one
    case; returns the tokens and the suite's uuid."""
    database_fresh()
    from django.contrib.auth.models import Group, User

    from apitokens.tokens import token_create
    from evals.models import Case, Suite

    out = {}
    for name, role in (("carol", "engineer"), ("bob", "reviewer")):
        user = User.objects.create_user(name, password=PASSWORD)
        user.groups.add(Group.objects.get(name=role))
        out[name] = token_create(user=user, name="bench")[1]
    suite = Suite.objects.create(name="s")
    Case.objects.create(suite=suite, key="c1", input="What is 2+2?", expected="4")
    out["suite"] = str(suite.uuid)
    from django.db import connections

    connections.close_all()
    return out


def many_small_keys(size: int) -> bytes:
    """An ingest JSON document of ``size`` bytes whose one trial holds many small keys."""
    n = size // 11
    keys = ",".join(f'"k{i:07d}":1' for i in range(n))
    return f'{{"suite":"s","run":"r","trials":[{{{keys}}}]}}'.encode()


def run_start_body(suite: str, seed: str) -> bytes:
    return (
        f'{{"suite":"{suite}","name":"r","target":{{"kind":"simulated","seed":{seed}}},'
        '"graders":[{"key":"exact","kind":"exact"}],"trials_per_case":1}'
    ).encode()


def form(fields: dict[str, str]) -> bytes:
    from urllib.parse import urlencode

    return urlencode(fields).encode()


def judge_form(**changes: str) -> dict[str, str]:
    return {
        "name": "helpful",
        "kind": "rubric",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "m",
        "prompt_template": "Judge $output.",
        "params_json": "{}",
        "output_schema_json": "",
        "threshold": "",
        **changes,
    }


def http_cases(data: dict[str, str]) -> list[tuple[str, str, object]]:
    """(name, path, sender) for each HTTP case; a sender returns [(status, body), ...]."""
    carol = {"Authorization": f"Bearer {data['carol']}", "Content-Type": "application/json"}
    bob = {"Authorization": f"Bearer {data['bob']}", "Content-Type": "application/json"}
    nd = {**carol, "Content-Type": "application/x-ndjson"}
    suite = data["suite"]
    label = json.dumps({"trial": suite, "verdict": "pass", "critique": "y" * 9_500_000}).encode()
    worst_1mib = (
        b'{"suite":"s","run":"r","trials":[' + b",".join([b"{}"] * ((MIB - 40) // 3)) + b"]}"
    )

    def one(path, body, headers):
        return lambda: [http("POST", path, body, headers)]

    def parallel(n, path, body, headers):
        def send():
            out: list = []
            threads = [
                threading.Thread(target=lambda: out.append(http("POST", path, body, headers)))
                for _ in range(n)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            return out

        return send

    browser = Browser("carol")

    def page(path, fields):
        return lambda: [browser.post(path, form(fields))]

    big = many_small_keys(64 * MIB)
    ndjson = b'{"suite":"s","run":"r"}\n' + big
    record = b'{"case_id":"c1","attempt":1,"output":"x","input":[' + b"{}," * 1_398_000
    containers = b'{"suite":"s","run":"r"}\n' + record + b"{}]}\n"  # ~4 MiB, 1.4 M objects
    params = json.dumps({f"k{i}": 1 for i in range(300_000)})
    params_under = json.dumps({f"k{i}": 1 for i in range(40_000)})
    template = "Judge $output. " + "x" * 1_000_000
    run_form = {
        "suite": suite,
        "name": "r",
        "target_kind": "simulated",
        "seed": str(2**70),
        "trials_per_case": "1",
        "graders": "[]",
    }
    new = "/judge-versions/new/"
    return [
        ("ingest, JSON, 64 MB of small keys", "/api/ingest", one("/api/ingest", big, carol)),
        (
            "ingest, JSON at its limit (1 MiB of {})",
            "/api/ingest",
            one("/api/ingest", worst_1mib, carol),
        ),
        ("ingest, NDJSON, one 64 MB line", "/api/ingest", one("/api/ingest", ndjson, nd)),
        (
            "ingest, NDJSON, one 4 MiB record of [{},{},…]",
            "/api/ingest",
            one("/api/ingest", containers, nd),
        ),
        (
            "labels, 3 parallel 9.5 MB bodies (reviewer)",
            "/api/labels",
            parallel(3, "/api/labels", label, bob),
        ),
        ("run start, 64 MB body", "/api/runs/start", one("/api/runs/start", big, carol)),
        (
            "run start, seed 2**70",
            "/api/runs/start",
            one("/api/runs/start", run_start_body(suite, str(2**70)), carol),
        ),
        (
            "run start, 4,000-digit seed",
            "/api/runs/start",
            one("/api/runs/start", run_start_body(suite, "9" * 4000), carol),
        ),
        (
            "run start, 5,000-digit number",
            "/api/runs/start",
            one("/api/runs/start", run_start_body(suite, "9" * 5000), carol),
        ),
        ("gate, 64 MB body (a reviewer)", "/api/gate", one("/api/gate", big, bob)),
        (
            "judge form, 300,000 params keys (4 MB post)",
            new,
            page(new, judge_form(params_json=params)),
        ),
        (
            "judge form, 40,000 params keys (0.8 MB post)",
            new,
            page(new, judge_form(params_json=params_under)),
        ),
        (
            "judge form, 2 MB prompt template",
            new,
            page(new, judge_form(prompt_template=template * 2)),
        ),
        ("judge form, 1 MB prompt template", new, page(new, judge_form(prompt_template=template))),
        (
            "judge form, params nested 10,000 deep",
            new,
            page(new, judge_form(params_json="[" * 10_000 + "]" * 10_000)),
        ),
        ("run form, seed 2**70", "/runs/new/", page("/runs/new/", run_form)),
        ("a form post of 30 MB", new, page(new, judge_form(prompt_template="x" * 30_000_000))),
        (
            "a form post at its limit, all percent escapes (1 MiB)",
            new,
            page(new, judge_form(prompt_template='"' * 349_000)),
        ),
    ]


# --- commands, in a process of their own -----------------------------------------------------


def command_one(argv: list[str]) -> None:
    """Run in a child process: set Django up, reset this process's peak RSS, run the command
    once, print {"exit", "message", "seconds", "rss_rise_kib"} as one JSON line."""
    import django

    django.setup()
    from django.core.management import CommandError, call_command

    before = peak_reset("self")
    start = time.perf_counter()
    code, message = 0, ""
    try:
        call_command(*argv)
    except CommandError as exc:
        code, message = exc.returncode, str(exc)
    except Exception as exc:  # a traceback: what the bench is looking for
        code, message = -1, f"{type(exc).__name__}: {str(exc)[:200]}"
    seconds = time.perf_counter() - start
    rise = status_kib("self", "VmHWM") - before
    print(
        json.dumps(
            {"exit": code, "message": message[:300], "seconds": seconds, "rss_rise_kib": rise}
        )
    )


def command_cases(folder: Path) -> list[tuple[str, list[str]]]:
    """(name, argv) for each command case; the files are written into ``folder``."""
    files = {
        "30 MB suite description": '[suites.s]\ndescription = "' + "x" * 30_000_000 + '"\n',
        "judge with 300,000 params keys": '[[judges]]\nname = "j"\nkind = "rubric"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\n[judges.params]\n'
        + "".join(f"k{i} = 1\n" for i in range(300_000)),
        "judge with 50,000 params keys (under 1 MiB)": '[[judges]]\nname = "j"\nkind = "rubric"\n'
        'model = "m"\nbase_url = "http://127.0.0.1:9/v1"\n[judges.params]\n'
        + "".join(f"k{i} = 1\n" for i in range(50_000)),
        "2 MB judge prompt template": '[[judges]]\nname = "j"\nkind = "rubric"\nmodel = "m"\n'
        'base_url = "http://127.0.0.1:9/v1"\nprompt_template = "Judge $output. '
        + "x" * 2_000_000
        + '"\n',
        "TOML nested 5,000 deep": "[targets.t]\nsettings = " + "[" * 5000 + "]" * 5000 + "\n",
        "TOML dotted keys 5,000 deep": "[targets.t]\nsettings" + ".a" * 5000 + " = 1\n",
        "TOML 5,000-digit integer": "[suites.s]\ndescription = 1" + "0" * 5000 + "\n",
    }
    cases = []
    for name, text in files.items():
        path = folder / (re.sub(r"\W+", "-", name) + ".toml")
        path.write_text(text)
        cases.append((f"apply_config: {name}", ["apply_config", str(path)]))
    cases.append(
        ("run_suite --seed 2**70", ["run_suite", "s", "--simulated", "--seed", str(2**70)])
    )
    cases.append(
        (
            "run_suite --seed of 5,000 digits",
            ["run_suite", "s", "--simulated", "--seed", "9" * 5000],
        )
    )
    return cases


def command_run(argv: list[str], env: dict[str, str]) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--one-command", json.dumps(argv)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {
            "exit": out.returncode,
            "message": out.stderr[-300:],
            "seconds": float("nan"),
            "rss_rise_kib": 0,
        }
    return json.loads(lines[-1])


# --- main ------------------------------------------------------------------------------------


def verdict(status: int, seconds: float, rise_mb: float, plain: bool) -> str:
    ok = 400 <= status < 500 and seconds < 1 and rise_mb < 100 and plain
    return "met" if ok else "MISSED"


def main() -> None:
    env = bench_env("assay_bench_hostile.sqlite3")
    os.environ.update(env)
    data = setup_data()
    child = server_start(PORT, env)
    rows = []
    try:
        pid = worker_pid(child.pid)
        for name, path, send in http_cases(data):
            before = peak_reset(pid)
            start = time.perf_counter()
            answers = send()
            seconds = time.perf_counter() - start
            rise_mb = (status_kib(pid, "VmHWM") - before) / 1024
            statuses = sorted({s for s, _ in answers})
            plain = all(ADVICE.encode() not in b for _, b in answers)
            detail = answers[0][1][:160].decode("utf-8", "replace").replace("\n", " ")
            if answers[0][1].lstrip().startswith(b"<"):  # a page: its form error, if any
                found = re.search(
                    rb'class="errorlist[^"]*"[^>]*>\s*<li>(.*?)</li>', answers[0][1], re.S
                )
                if found is None:  # the 400 page: its message
                    found = re.search(rb'id="bad-request-message">(.*?)</p>', answers[0][1], re.S)
                detail = found.group(1)[:160].decode("utf-8", "replace") if found else "(page)"
            status = statuses[0]
            form_ok = path.endswith("/new/") and status == 200 and detail != "(page)"
            mark = verdict(400 if form_ok else status, seconds, rise_mb, plain)
            answer = "/".join(map(str, statuses))
            rows.append((name, answer, seconds, rise_mb, mark, detail))
    finally:
        server_stop(child)
    with tempfile.TemporaryDirectory() as folder:
        for name, argv in command_cases(Path(folder)):
            result = command_run(argv, env)
            rise_mb = result["rss_rise_kib"] / 1024
            plain = ADVICE not in result["message"] and "Traceback" not in result["message"]
            code = result["exit"]
            mark = (
                "met"
                if code > 0 and result["seconds"] < 1 and rise_mb < 100 and plain
                else "MISSED"
            )
            rows.append(
                (name, f"exit {code}", result["seconds"], rise_mb, mark, result["message"][:160])
            )
    print(f"server: {server_label()}; nproc {os.cpu_count()}; load {os.getloadavg()}")
    print("| input | answer | time (s) | peak RSS rise (MB) | target | what it said |")
    print("|---|---|---|---|---|---|")
    for name, answer, seconds, rise, mark, detail in rows:
        detail = detail.replace("|", "\\|")
        print(f"| {name} | {answer} | {seconds:.3f} | {rise:.1f} | {mark} | {detail} |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--one-command":
        command_one(json.loads(sys.argv[2]))
    else:
        main()

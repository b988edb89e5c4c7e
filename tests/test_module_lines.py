"""`.ci/module_lines.py` (run by `make lint`): production modules over 600 lines fail unless
one of their first 3 lines says why."""

import importlib.util
import subprocess
import sys
from pathlib import Path

from tests.conftest import PRODUCTION_PACKAGES

SCRIPT = Path(__file__).resolve().parent.parent / ".ci" / "module_lines.py"


def module_write(root: Path, relative: str, lines: int, head: str = "") -> None:
    """A module of exactly ``lines`` lines, the first ones ``head``'s."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    head_lines = head.splitlines()
    body = head_lines + [f"x{i} = {i}" for i in range(lines - len(head_lines))]
    path.write_text("\n".join(body) + "\n", encoding="utf-8")


def module_lines_run(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_module_of_601_lines_fails_with_its_count(tmp_path):
    module_write(tmp_path, "evals/big.py", 601)
    module_write(tmp_path, "evals/__init__.py", 1)

    result = module_lines_run(tmp_path)

    assert result.returncode == 1
    assert "evals/big.py: 601 lines (over 600)" in result.stdout.splitlines()
    assert "evals/__init__.py" not in result.stdout


def test_a_module_of_600_lines_passes(tmp_path):
    module_write(tmp_path, "judges/models.py", 600)

    result = module_lines_run(tmp_path)

    assert result.returncode == 0, result.stdout
    assert result.stdout == ""


def test_a_longer_module_passes_when_one_of_its_first_3_lines_says_why(tmp_path):
    module_write(
        tmp_path,
        "interop/importers/tabular.py",
        900,
        head='"""Tabular imports."""\n\n# longer than 600 lines: one parser table, read top down',
    )

    result = module_lines_run(tmp_path)

    assert result.returncode == 0, result.stdout


def test_a_reason_comment_needs_a_reason_and_a_place_in_the_first_3_lines(tmp_path):
    module_write(tmp_path, "core/empty_reason.py", 601, head="# longer than 600 lines:")
    module_write(
        tmp_path,
        "core/late_reason.py",
        601,
        head='"""Late."""\n\n\n# longer than 600 lines: said too late',
    )

    result = module_lines_run(tmp_path)

    assert result.returncode == 1
    assert "core/empty_reason.py: 601 lines (over 600)" in result.stdout
    assert "core/late_reason.py: 601 lines (over 600)" in result.stdout


def test_tests_migrations_bench_and_other_folders_are_not_production_code(tmp_path):
    module_write(tmp_path, "evals/migrations/0001_initial.py", 2000)
    module_write(tmp_path, "clients/python/tests/test_gate.py", 2000)
    module_write(tmp_path, "tests/evals/test_big.py", 2000)
    module_write(tmp_path, "bench/bench_big.py", 2000)
    module_write(tmp_path, "docs/example.py", 2000)

    result = module_lines_run(tmp_path)

    assert result.returncode == 0, result.stdout


def test_the_client_package_and_every_app_are_checked(tmp_path):
    module_write(tmp_path, "clients/python/src/assay_client/gate.py", 601)
    module_write(tmp_path, "providers/prices.py", 601)
    module_write(tmp_path, "stats/gate.py", 601)

    result = module_lines_run(tmp_path)

    assert result.returncode == 1
    assert result.stdout.splitlines()[:3] == [
        "clients/python/src/assay_client/gate.py: 601 lines (over 600)",
        "providers/prices.py: 601 lines (over 600)",
        "stats/gate.py: 601 lines (over 600)",
    ]


def test_the_script_checks_every_production_package():
    spec = importlib.util.spec_from_file_location("module_lines", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    assert set(module.PACKAGES) == {*PRODUCTION_PACKAGES, "clients/python"}

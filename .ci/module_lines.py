"""Fail when a production module is over 600 lines (docs/architecture.md, "Inside an app").

    python .ci/module_lines.py [--root DIR]

Production modules are the ``*.py`` files under the project's packages and the client
package (``PACKAGES``), outside ``tests/``, ``migrations/`` and ``bench/``. A module may be
longer when one of its first 3 lines is the comment ``# longer than 600 lines: <reason>``
(the reason not empty). Each offender is printed with its line count; the exit status is 1
when there is one, else 0.

It lives in ``.ci/``, beside the CI script that runs ``make lint``, because it checks the
tree rather than being part of the product: no package imports it, and it runs with the
standard library alone (no Django, no project import), so it reads the files as text and
works on any tree, ``--root`` a temporary one in its test (tests/test_module_lines.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

MAX_LINES = 600
# Top-level packages of production code (``providers`` is checked when it exists).
PACKAGES = (
    "apitokens",
    "config",
    "core",
    "demo",
    "evals",
    "interop",
    "judges",
    "labeling",
    "providers",
    "stats",
    "clients/python",
)
# Folders that are not production code wherever they sit; hidden folders are skipped too.
SKIPPED_DIRS = frozenset(
    {"tests", "migrations", "bench", "build", "dist", "__pycache__", "node_modules"}
)
REASON_PREFIX = "# longer than 600 lines:"


def production_modules(root: Path) -> list[Path]:
    """The production ``*.py`` files under ``root``, sorted."""
    found = []
    for package in PACKAGES:
        base = root / package
        if not base.is_dir():
            continue
        for path in base.rglob("*.py"):
            parts = path.relative_to(root).parts[:-1]
            if any(
                part in SKIPPED_DIRS or part.startswith(".") or part.endswith(".egg-info")
                for part in parts
            ):
                continue
            found.append(path)
    return sorted(found)


def has_reason(lines: list[str]) -> bool:
    """Whether one of the first 3 lines is ``# longer than 600 lines: <reason>``."""
    for line in lines[:3]:
        text = line.strip()
        if text.startswith(REASON_PREFIX) and text[len(REASON_PREFIX) :].strip():
            return True
    return False


def offenders(root: Path) -> list[tuple[Path, int]]:
    """(path relative to ``root``, line count) of every module over ``MAX_LINES`` lines
    without a reason."""
    found = []
    for path in production_modules(root):
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_LINES and not has_reason(lines):
            found.append((path.relative_to(root), len(lines)))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="the project's folder (default: this script's parent's parent)",
    )
    args = parser.parse_args(argv)
    found = offenders(args.root)
    for path, count in found:
        print(f"{path.as_posix()}: {count} lines (over {MAX_LINES})")
    if found:
        print(
            f"{len(found)} module(s) over {MAX_LINES} lines: split each into a package by "
            f"concept (docs/architecture.md, 'Inside an app'), or say why it must be longer "
            f"in one of its first 3 lines: '{REASON_PREFIX} <reason>'"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

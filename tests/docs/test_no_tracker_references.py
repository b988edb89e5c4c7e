"""Production code names no tracker item: a docstring or comment saying "issue 17" or
"fault A1" means nothing to a reader of the code (docs/architecture.md, "Inside an app").
An upstream project's issue is cited with its project and number sign ("kombu issue #1551")."""

import re
from pathlib import Path

from tests.conftest import PRODUCTION_PACKAGES

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (*PRODUCTION_PACKAGES, "clients/python/src")
TRACKER = re.compile(r"\b(?:[Ii]ssues?|[Ff]aults?|[Tt]asks?) (?:[0-9]+|[A-Z][0-9]+)\b")


def tracker_references(root: Path) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if TRACKER.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return found


def test_no_production_module_names_a_tracker_item():
    assert tracker_references(ROOT) == []


def test_the_check_finds_a_tracker_item_and_spares_an_upstream_one(tmp_path):
    module = tmp_path / "core" / "m.py"
    module.parent.mkdir()
    module.write_text(
        '"""Pausing the collector (fault H1)."""\n'
        "# kombu issue #1551: its exchange tables share the window\n"
        "# see issue 17, item 2\n"
    )
    assert tracker_references(tmp_path) == [
        'core/m.py:1: """Pausing the collector (fault H1)."""',
        "core/m.py:3: # see issue 17, item 2",
    ]

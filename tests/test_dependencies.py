"""Every third-party module the product imports is a declared dependency of its own.

Why: ``make demo`` installs only ``[project] dependencies`` (``make test`` adds the test
extra), so a module that reaches the product's venv only through the test tools (``certifi``
came with httpx) passes every test and breaks the demo on a fresh clone. Read from the
source (every ``import``, lazy ones included), mapped to distributions by
``importlib.metadata.packages_distributions``.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions, requires
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = (
    "config",
    "core",
    "stats",
    "providers",
    "evals",
    "judges",
    "labeling",
    "interop",
    "apitokens",
    "demo",
)


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _imported_top_levels() -> dict[str, str]:
    """Top-level module -> one file importing it, for every import in the product's code."""
    found: dict[str, str] = {}
    for package in PRODUCT:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    found.setdefault(name.split(".")[0], str(path.relative_to(ROOT)))
    return found


def test_every_third_party_module_the_product_imports_is_declared():
    declared = {
        _name(r)
        for r in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    distributions = packages_distributions()
    missing = {}
    for module, where in sorted(_imported_top_levels().items()):
        if module in sys.stdlib_module_names or module in PRODUCT or (ROOT / module).exists():
            continue
        names = {d.lower().replace("_", "-") for d in distributions.get(module, [])}
        assert names, f"{module} (imported in {where}) is not installed"
        if not names & declared:
            missing[module] = (where, sorted(names))
    assert missing == {}


def _closure(requirements: list[str]) -> set[str]:
    """Every distribution ``requirements`` install, with the extras they ask for
    (``importlib.metadata`` of what is installed; markers evaluated for this Python)."""
    from packaging.requirements import Requirement  # noqa: PLC0415 - a test tool's module

    seen: set[tuple[str, str]] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        requirement = todo.pop()
        name = requirement.name.lower().replace("_", "-")
        for extra in ["", *sorted(requirement.extras)]:
            if (name, extra) in seen:
                continue
            seen.add((name, extra))
            for line in requires(name) or []:
                needed = Requirement(line)
                if needed.marker is None or needed.marker.evaluate({"extra": extra}):
                    todo.append(needed)
    return {name for name, _ in seen}


def test_the_declared_dependencies_bring_what_the_redis_broker_imports():
    """``REDIS_URL`` makes kombu load its Redis transport, which needs its ``redis`` extra
    (``packaging`` among it): a product-only install must have it."""
    from packaging.requirements import Requirement  # noqa: PLC0415 - a test tool's module

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    installed = _closure(declared)
    transport = {
        Requirement(line).name.lower()
        for line in requires("kombu") or []
        if Requirement(line).marker is not None
        and Requirement(line).marker.evaluate({"extra": "redis"})
        and not Requirement(line).marker.evaluate({"extra": ""})
    }
    assert transport, "kombu declares no redis extra: read its metadata again"
    assert transport <= installed, sorted(transport - installed)

"""Every project name and path ``docs/architecture.md`` cites in backticks exists.

What is checked (fenced code blocks left out; spans holding a space are prose, not names):

- a dotted name whose first part is a project package (``evals.models.CaseChange``,
  ``core.errors.DomainError(message, ...)``: the call's arguments dropped) imports as a
  module, or as a module and an attribute chain on it;
- ``Model.attr`` for a model of the project (``Run.grader_set``,
  ``JudgeVersion.objects.trusted()``, ``JudgeVersion.params["examples"]``) and
  ``Class.attr`` for another class of an imported project module (``CallPool.stop``):
  the attribute chain exists on the class;
- the bare names in the parentheses right after a cited module or function
  (``evals.run_status`` (``run_status_shown``, ...)) are attributes of the module, or of the
  function's module, or parameters of the function (``trust_revoke`` (``approval_uuid``));
- a path (holding ``/`` or ending in a file suffix) exists: from the project folder when its
  first part is there (``evals/runner/start.py``, ``tests/core``), else as the tail of a
  project path (``targets/base.py``, ``models.py``: the anatomy of an app); a path with a
  placeholder (``evals/runner/targets/<kind>.py``) up to its placeholder; ``docs/*.md``
  named outside backticks too.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
import types
from dataclasses import dataclass

from django.apps import apps

from tests.conftest import PRODUCTION_PACKAGES, PROJECT_DIR

DOC = PROJECT_DIR / "docs" / "architecture.md"
PACKAGES = PRODUCTION_PACKAGES
# Spans that name no project thing though they look like one, with why.
NOT_NAMES = {
    "comparison_compute.py": "the counter-example of a split by name prefix",
    "usd": "a template filter (core/templatetags/dashboard.py), beside `core.money.usd_text`",
    "progress": "a cache alias (settings.CACHES), beside `interop.import_jobs`",
}
# Names in a module's parentheses that live elsewhere, as the prose around them says; each
# must still be a function or class defined in the project.
ELSEWHERE = {
    "run_finalize": "`run_summary_refresh` from `run_finalize` (the caller)",
    "OpenAITarget": "`CallPool.stop`; checked by `OpenAITarget` (the checker)",
}
FILE_SUFFIXES = (".py", ".md", ".html", ".toml", ".txt", ".json", ".cfg", ".sh", ".yml")
SKIPPED_FOLDERS = {".git", ".venv", "node_modules", "__pycache__", "var", ".ruff_cache"}
IDENTIFIER = re.compile(r"@?[A-Za-z_][A-Za-z0-9_]*")
CLASS_ATTR = re.compile(r"([A-Z][A-Za-z0-9]*)((?:\.[A-Za-z_][A-Za-z0-9_]*)+)")


@dataclass(frozen=True)
class Span:
    text: str
    line: int  # 1-based line number in the doc
    after: str  # the rest of the doc's line after the span


def spans_read() -> list[Span]:
    """The backticked spans outside fenced code blocks, with their line numbers."""
    found = []
    fenced = False
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), start=1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        for match in re.finditer(r"`([^`]+)`", line):
            found.append(Span(match[1], number, line[match.end() :]))
    return found


def name_clean(text: str) -> str:
    """``core.errors.DomainError(message, field=)`` -> ``core.errors.DomainError``;
    ``JudgeVersion.params["examples"]`` -> ``JudgeVersion.params``."""
    return re.split(r"[(\[]", text, maxsplit=1)[0]


def is_path(text: str) -> bool:
    return " " not in text and ("/" in text or text.endswith(FILE_SUFFIXES))


def is_project_dotted(text: str) -> bool:
    cleaned = name_clean(text)
    return (
        " " not in cleaned
        and "/" not in cleaned
        and cleaned.split(".")[0] in PACKAGES
        and not cleaned.endswith(FILE_SUFFIXES)
        and all(IDENTIFIER.fullmatch(part) for part in cleaned.split("."))
    )


def dotted_resolve(name: str) -> object:
    """The module or object a dotted project name names; raises ImportError or
    AttributeError when it names nothing."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            found: object = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name) and cut > 1:
                continue
            raise
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(name)


def attribute_chain_problem(owner: object, chain: list[str]) -> str | None:
    found = owner
    for attribute in chain:
        if not hasattr(found, attribute):
            return f"{getattr(found, '__name__', found)!s} has no attribute {attribute!r}"
        found = getattr(found, attribute)
    return None


def project_paths() -> list[str]:
    """Every file and folder of the project, relative, with "/" separators."""
    found = []
    for path in PROJECT_DIR.rglob("*"):
        relative = path.relative_to(PROJECT_DIR)
        if SKIPPED_FOLDERS.intersection(relative.parts):
            continue
        found.append(relative.as_posix())
    return found


def test_every_cited_path_exists():
    paths = project_paths()
    text = DOC.read_text(encoding="utf-8")
    cited = [(span.text, span.line) for span in spans_read() if is_path(span.text)]
    cited += [
        (match[0], text.count("\n", 0, match.start()) + 1)
        for match in re.finditer(r"(?<![\w/.`])docs/[\w-]+\.md", text)
    ]
    problems = []
    for path, line in cited:
        if path in NOT_NAMES:
            continue
        wanted = path.split("<", 1)[0]  # a placeholder's path: up to its folder
        if "<" in path and not wanted.endswith("/"):
            wanted = wanted.rpartition("/")[0]
        wanted = wanted.rstrip("/")
        if not wanted:
            continue
        if (PROJECT_DIR / wanted.split("/")[0]).exists():
            exists = (PROJECT_DIR / wanted).exists()
        else:
            exists = any(p == wanted or p.endswith("/" + wanted) for p in paths)
        if not exists:
            problems.append(f"line {line}: `{path}` is no path of the project")
    assert not problems, "\n".join(problems)


def test_every_cited_project_name_resolves():
    problems = []
    for span in spans_read():
        if not is_project_dotted(span.text):
            continue
        name = name_clean(span.text)
        try:
            dotted_resolve(name)
        except (ImportError, AttributeError) as exc:
            problems.append(f"line {span.line}: `{name}` does not resolve ({exc})")
    assert not problems, "\n".join(problems)


def project_classes() -> dict[str, list[type]]:
    """Classes defined in the project's imported modules, by name (after every cited
    module was imported by the test above or here)."""
    for span in spans_read():
        if is_project_dotted(span.text):
            # A name that does not resolve is reported by test_every_cited_project_name_resolves.
            with contextlib.suppress(ImportError, AttributeError):
                dotted_resolve(name_clean(span.text))
    found: dict[str, list[type]] = {}
    for module_name, module in list(sys.modules.items()):
        if module_name.split(".")[0] not in PACKAGES or module is None:
            continue
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module_name:
                found.setdefault(value.__name__, []).append(value)
    for model in apps.get_models():
        found.setdefault(model.__name__, []).append(model)
    return found


def test_every_cited_class_attribute_exists():
    classes = project_classes()
    problems = []
    for span in spans_read():
        text = name_clean(span.text)
        match = CLASS_ATTR.fullmatch(text)
        if not match or is_project_dotted(text):
            continue
        owners = classes.get(match[1])
        if not owners:
            problems.append(f"line {span.line}: `{text}`: no project class {match[1]}")
            continue
        chain = match[2].lstrip(".").split(".")
        failures = [attribute_chain_problem(owner, chain) for owner in owners]
        if all(failures):
            problems.append(f"line {span.line}: `{text}`: {failures[0]}")
    assert not problems, "\n".join(problems)


def names_in_parentheses(span: Span, spans: list[Span]) -> list[Span]:
    """The backticked bare names inside the parentheses that open right after ``span``."""
    if not span.after.startswith(" ("):
        return []
    depth = 0
    inside = ""
    for char in span.after[1:]:
        depth += char == "("
        depth -= char == ")"
        inside += char
        if depth == 0:
            break
    names = [m[1] for m in re.finditer(r"`([^`]+)`", inside) if IDENTIFIER.fullmatch(m[1])]
    return [Span(name, span.line, "") for name in names]


def defined_in_project(name: str) -> bool:
    """Whether a production module of the project has ``def name`` or ``class name``."""
    definition = re.compile(rf"^\s*(?:async\s+)?(?:def|class)\s+{re.escape(name)}\b", re.M)
    return any(
        definition.search(path.read_text(encoding="utf-8"))
        for package in PACKAGES
        if (PROJECT_DIR / package).is_dir()
        for path in (PROJECT_DIR / package).rglob("*.py")
    )


def test_names_beside_a_cited_module_or_function_are_in_it():
    spans = spans_read()
    problems = []
    for span in spans:
        if not is_project_dotted(span.text) or "(" in span.text:
            continue
        try:
            cited = dotted_resolve(span.text)
        except (ImportError, AttributeError):
            continue  # reported by test_every_cited_project_name_resolves
        for name_span in names_in_parentheses(span, spans):
            name = name_span.text.lstrip("@")
            if name in NOT_NAMES:
                continue
            if name in ELSEWHERE:
                if not defined_in_project(name):
                    problems.append(f"line {span.line}: `{name}` is defined nowhere")
                continue
            if isinstance(cited, types.ModuleType):
                holders: list[object] = [cited]
            else:
                holders = [cited, sys.modules[cited.__module__]]
            if any(hasattr(holder, name) for holder in holders):
                continue
            is_function = callable(cited) and not inspect.isclass(cited)
            if is_function and name in inspect.signature(cited).parameters:
                continue
            problems.append(
                f"line {span.line}: `{name}` (beside `{span.text}`) is not in "
                + " nor ".join(getattr(h, "__name__", str(h)) for h in holders)
            )
    assert not problems, "\n".join(problems)

"""Functions a configuration may name (``KINDS``: pipeline, tool, environment, grader, oracle):
only those the operator registered, looked up by name and kind, never imported.

``@registered`` marks a function; it is registered when a registry module exposing it is
loaded at start-up: those in ``ASSAY_REGISTRIES`` and the ``assay.registry`` entry points."""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from django.core.exceptions import ImproperlyConfigured

from core.errors import DomainError

KINDS = ("pipeline", "tool", "environment", "grader", "oracle")
ENTRY_POINT_GROUP = "assay.registry"
SETTING = "ASSAY_REGISTRIES"
MAX_NAME_CHARS = 200
_MARK = "__assay_registered__"


@dataclass(frozen=True)
class Registration:
    """What ``@registered`` declares on a function: its ``name`` and ``kinds``."""

    name: str
    kinds: frozenset[str]


F = TypeVar("F", bound=Callable[..., Any])


def registered(*kinds: str, name: str | None = None) -> Callable[[F], F]:
    """Mark a function as callable by configs under ``name`` for ``kinds``; stacked, kinds add up.
    Raises ``ValueError`` for no kind, an unknown kind, an empty name, or a second name."""
    unknown = sorted(set(kinds) - set(KINDS))
    if not kinds or unknown:
        raise ValueError(f"kinds must be some of {', '.join(KINDS)}, got {kinds!r}")

    def mark(function: F) -> F:
        if not callable(function):
            raise ValueError(f"{function!r} is not callable")
        spelled = name or f"{function.__module__}:{function.__qualname__}"
        if not spelled or len(spelled) > MAX_NAME_CHARS:
            raise ValueError(f"a registered name has 1 to {MAX_NAME_CHARS} characters")
        held = getattr(function, _MARK, None)  # stacked decorators: the kinds add up
        if isinstance(held, Registration) and held.name != spelled:
            raise ValueError(f"{function!r} is already registered as {held.name!r}")
        more = held.kinds if isinstance(held, Registration) else frozenset()
        setattr(function, _MARK, Registration(name=spelled, kinds=frozenset(kinds) | more))
        return function

    return mark


@dataclass(frozen=True)
class Entry:
    """A registered ``function`` with its ``name``, ``kinds`` and the ``source`` that exposed it."""

    name: str
    kinds: frozenset[str]
    function: Callable[..., Any]
    source: str


@dataclass
class Registry:
    """Registered functions by name, and the ``sources`` loaded."""

    entries: dict[str, Entry] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_module(self, module: types.ModuleType, *, source: str) -> None:
        """Register the marked functions among ``module``'s top-level names. Raises
        ``ImproperlyConfigured`` when a name is taken by another function."""
        for value in list(vars(module).values()):
            registration = getattr(value, _MARK, None) if callable(value) else None
            if not isinstance(registration, Registration):
                continue
            held = self.entries.get(registration.name)
            if held is not None and held.function is not value:
                raise ImproperlyConfigured(
                    f"{source} registers {registration.name!r}, already registered by "
                    f"{held.source} for another function"
                )
            self.entries[registration.name] = Entry(  # the first registry to expose it names it
                name=registration.name,
                kinds=registration.kinds,
                function=value,
                source=held.source if held else source,
            )
        self.sources.append(source)


def registry_load(*, modules: Iterable[str], entry_points: bool = True) -> Registry:
    """A registry of ``modules`` and, with ``entry_points``, the ``assay.registry`` group. Raises
    ``ImproperlyConfigured`` for a module that cannot be imported or a name registered twice."""
    registry = Registry()
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise ImproperlyConfigured(
                f"{SETTING} lists {module_name!r}, which cannot be imported: {exc}"
            ) from exc
        registry.add_module(module, source=module_name)
    if entry_points:
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                loaded = point.load()
            except ImportError as exc:
                raise ImproperlyConfigured(
                    f"entry point {point.name!r} ({ENTRY_POINT_GROUP}) cannot be imported: {exc}"
                ) from exc
            if not isinstance(loaded, types.ModuleType):
                raise ImproperlyConfigured(
                    f"entry point {point.name!r} ({ENTRY_POINT_GROUP}) must name a module, "
                    f"not {point.value!r}"
                )
            registry.add_module(loaded, source=f"entry point {point.name}")
    return registry


_active = Registry()


def registry_install(registry: Registry) -> None:
    """Make ``registry`` the one ``registry_get`` reads (start-up; the demo adds its own)."""
    global _active  # noqa: PLW0603 - the process's one registry, set at start-up
    _active = registry


def registry_active() -> Registry:
    """The registry ``registry_get`` reads."""
    return _active


def registry_get(*, name: Any, kind: str, field: str) -> Callable[..., Any]:
    """The function registered as ``name`` for ``kind``. Raises ``DomainError`` on ``field`` when
    ``name`` is not a string, no registry is loaded (naming ``ASSAY_REGISTRIES``), or the name
    is not registered for ``kind``."""
    if not isinstance(name, str) or not name:
        raise DomainError(f"expected the registered name of a {kind}", field=field)
    registry = _active
    if not registry.sources:
        raise DomainError(
            f"no registry is loaded, so no {kind} can run: the operator lists the modules "
            f'that register functions in {SETTING} (docs/config.md, "Registered functions")',
            field=field,
        )
    entry = registry.entries.get(name)
    if entry is None:
        raise DomainError(
            f"{name!r:.200} is not a registered {kind} (registries: "
            f"{', '.join(registry.sources)}; {SETTING})",
            field=field,
        )
    if kind not in entry.kinds:
        raise DomainError(
            f"{name!r:.200} is registered for {', '.join(sorted(entry.kinds))} only, "
            f"not as a {kind}",
            field=field,
        )
    return entry.function


def registry_names(*, kind: str) -> list[str]:
    """The names registered for ``kind``, sorted (forms' help, messages)."""
    return sorted(e.name for e in _active.entries.values() if kind in e.kinds)


def registry_settings_check(
    *, function: Callable[..., Any], settings: Mapping[str, Any], field: str, skip: int = 1
) -> None:
    """``function`` accepts each key of ``settings`` as a keyword after ``skip`` positional
    parameters (``**kwargs`` accepts any). Raises ``DomainError`` on ``<field>.<key>``."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check against
        return
    parameters = list(signature.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    taken = [p for p in parameters if p.kind in positional][:skip]
    accepted = {
        p.name
        for p in parameters
        if p not in taken
        and p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    for key in settings:
        if key not in accepted:
            known = ", ".join(sorted(accepted)) or "none"
            raise DomainError(
                f"the function takes no setting {key!r:.80} (its settings: {known})",
                field=f"{field}.{key[:80]}",
            )

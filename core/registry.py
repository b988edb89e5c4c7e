"""Functions a configuration may name: only those the operator registered.

A callable target's ``path`` (kind ``pipeline``), a tool loop's ``tools`` (``tool``) and
``environment`` (``environment``), a ``python`` grader's ``function`` (``grader``) and a
contract's ``oracle.function`` (``oracle``) name code the worker calls with a case. A name in
a config, the API or a form is looked up here and nowhere else: nothing is ever imported from
it, and the kind must match (a tool is not a pipeline).

Code registers a function with a decorator; its name defaults to ``module:qualname``, the
spelling configs have always used::

    @registered("pipeline")
    def answer(case, *, temperature: float = 0.0) -> str: ...   # "mypackage.pipeline:answer"

A decorated function is registered only when a *registry module* exposes it among its
top-level names (defines or imports it) and that module is loaded: the modules listed in
``ASSAY["REGISTRIES"]`` (env ``ASSAY_REGISTRIES``, comma-separated module names, loaded once
at start-up by ``core.apps.CoreConfig.ready``, so web, worker and commands see the same
names), and the modules installed packages declare in the ``assay.registry`` entry-point
group (installing the package is the operator registering them). Importing a decorated
module elsewhere (a shell, a test, another module) registers nothing. With neither, no
configured code runs at all, and the refusal names ``ASSAY_REGISTRIES``.

Settings a pipeline is called with are checked against its declared parameters
(``registry_settings_check``) when a run is declared or started, unless it takes ``**kwargs``.
"""

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
    """Decorator: declare a function as callable by configs under ``name`` (default
    ``module:qualname``) for ``kinds`` (any of ``KINDS``). Returns the function unchanged but
    for the mark; a registry module that exposes it registers it (module docstring). Stacked,
    the kinds add up. Raises ``ValueError`` for no kind, an unknown kind, an empty name, or a
    second name for one function."""
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
    """One registered function: its ``name``, ``kinds``, the ``function`` and the registry
    ``source`` (module or entry point) that exposed it."""

    name: str
    kinds: frozenset[str]
    function: Callable[..., Any]
    source: str


@dataclass
class Registry:
    """The registered functions by name, and the ``sources`` loaded (module names, and
    ``entry point <name>`` for the entry-point group)."""

    entries: dict[str, Entry] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)

    def add_module(self, module: types.ModuleType, *, source: str) -> None:
        """Register every marked function among ``module``'s top-level names. Raises
        ``ImproperlyConfigured`` when a name is already registered to another function."""
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
    """A registry of what ``modules`` (module names) and, when ``entry_points``, the modules
    the ``assay.registry`` entry-point group names expose. Raises ``ImproperlyConfigured``
    naming ``ASSAY_REGISTRIES`` or the entry point when one cannot be imported or is not a
    module, or when two register one name for different functions (a start-up error, not a
    user's)."""
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
    """The function registered as ``name`` for ``kind``. Never imports anything. Raises
    ``DomainError`` naming ``field`` when ``name`` is not a string, no registry is loaded
    (the message names ``ASSAY_REGISTRIES``), ``name`` is not registered, or it is registered
    for other kinds only."""
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
    """Check that ``function`` accepts each key of ``settings`` as a keyword, after its first
    ``skip`` positional parameters (the case). A function taking ``**kwargs`` accepts any.
    Raises ``DomainError`` naming ``<field>.<key>`` for the first key it would not accept."""
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

"""Functions named in configuration (``package.module:function``): one resolver, with the
modules it may import held to an allow-list.

A callable target's ``path``, a tool loop's ``tools`` and ``environment``, a ``python``
grader's ``function`` and a contract's ``oracle.function`` name code the worker imports and
calls with a case. Anyone who may start a run or declare a grader set could name any
importable function (``os:system``, ``subprocess:run``, ``shutil:rmtree``) and run it on
the worker. So a path's module must lie under one of ``ASSAY["CALLABLE_MODULES"]`` (env
``ASSAY_CALLABLE_MODULES``, comma-separated; default ``demo,examples``): ``mypipeline``
admits ``mypipeline`` and ``mypipeline.agents``, never ``mypipeline_old`` or ``os``. A path
outside it is refused before anything is imported, naming the field.
"""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable
from typing import Any

from django.conf import settings

from core.errors import DomainError


def callable_modules() -> tuple[str, ...]:
    """The module prefixes a configured function may come from (``ASSAY["CALLABLE_MODULES"]``)."""
    return tuple(settings.ASSAY.get("CALLABLE_MODULES", ()))


def callable_allowed(module_name: str) -> bool:
    """Whether ``module_name`` is one of the allowed modules or inside one (whole dotted
    components: ``demo`` admits ``demo.refund_agent``, not ``demolition``)."""
    return any(module_name == m or module_name.startswith(m + ".") for m in callable_modules())


def callable_resolve(path: Any, *, field: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (attribute chains allowed after the colon,
    ``module:Class.method``) and return the callable. Raises ``DomainError`` naming
    ``field`` when ``path`` is not of that form, its module is outside
    ``ASSAY["CALLABLE_MODULES"]`` (nothing is imported then), it cannot be imported, an
    attribute is missing or special (``__globals__``), the chain passes through another module
    (``demo.x:json.codecs.builtins.eval``), the object is defined outside the allowed modules
    (``from os import system`` in an allowed module), or it is not callable."""
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise DomainError(f"expected 'package.module:function', got {path!r:.200}", field=field)
    module_name, _, attr_path = path.partition(":")
    if not callable_allowed(module_name):
        allowed = ", ".join(callable_modules()) or "none"
        raise DomainError(
            f"module {module_name!r:.200} is not in ASSAY_CALLABLE_MODULES (allowed: {allowed}); "
            "add your pipeline's package there to run it",
            field=field,
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise DomainError(f"cannot import {module_name!r}: {exc}", field=field) from exc
    for attr in attr_path.split("."):
        if attr.startswith("__"):  # ``__globals__``, ``__builtins__``: a way out
            raise DomainError(
                f"{path!r:.200}: {attr!r:.80} is a special name; name a function", field=field
            )
        try:
            obj = getattr(obj, attr)
        except AttributeError as exc:
            raise DomainError(f"{module_name!r} has no {attr_path!r}", field=field) from exc
        if isinstance(obj, types.ModuleType):  # ``demo.x:json.codecs.builtins.eval``
            raise DomainError(
                f"{path!r:.200}: {attr!r:.80} is a module; name a function defined under "
                "ASSAY_CALLABLE_MODULES",
                field=field,
            )
    if not callable(obj):
        raise DomainError(f"{path!r} is not callable", field=field)
    defined_in = getattr(obj, "__module__", None)
    if not isinstance(defined_in, str) or not callable_allowed(defined_in):
        # ``from os import system`` in an allowed module: the name is there, the code is not.
        raise DomainError(
            f"{path!r:.200} is defined in {defined_in!r:.200}, which is not in "
            "ASSAY_CALLABLE_MODULES",
            field=field,
        )
    return obj

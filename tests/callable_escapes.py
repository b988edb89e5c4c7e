"""A module under an allowed prefix whose imports lead out of it (``tests/core/
test_callables.py``): the paths through ``json``, ``os.system`` and the private names must be
refused; ``answer`` is the one function defined here."""

import json  # noqa: F401  (the way out the test tries)
from os import system  # noqa: F401  (imported, not defined here)

_os_system = system


def answer(case, **settings):
    return "42"

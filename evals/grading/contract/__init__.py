"""The ``contract`` grader kind: a strict schema, an independent oracle per item, coverage
derived from the items' inputs, provenance and source version, and a decision (``reject``
or ``review``) that never accepts by itself. ``config`` parses a contract, ``check`` checks
one output, ``decisions`` reads a run's decisions. The reference is docs/contracts.md."""

"""The ``contract`` grader kind: a strict schema, an independent oracle per item, coverage
derived from the items' inputs, provenance and source version, and a decision (``reject``
or ``review``) that never accepts by itself. ``config`` parses a contract, ``check`` checks
one output, ``decisions`` reads a run's decisions. The reference is docs/contracts.md."""

# A contract's config options (``evals.grading.contract.config`` reads them): here, so the
# grader registry names them without importing the parser's jsonschema and celpy.
OPTIONS = (
    "schema",
    "items",
    "id_field",
    "oracle",
    "coverage",
    "required_coverage",
    "provenance",
    "source_version",
    "review",
)

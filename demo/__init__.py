"""Assay's own demo: an expense-policy assistant, its suites and its business-rule oracle,
the demo data set up by `manage.py demo` (what `make demo` runs)."""

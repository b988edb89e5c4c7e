"""Assay's own demo: an expense-policy assistant, its suites and its business-rule oracle."""

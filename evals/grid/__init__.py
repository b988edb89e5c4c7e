"""The grid of runs: one row per case, one column per run of a suite (``evals.grid.build``),
and a case's history across every run of its suite (``evals.grid.history``)."""

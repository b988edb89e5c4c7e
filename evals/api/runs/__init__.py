"""The API of evals' resources (suites, cases, runs, trials, grades, baselines), read-only
with their filters, and the actions on them: start, retry, cancel and grade a run, set a
baseline. Thin: parse, call one service, render. The gate, comparisons and downloads are in
``evals.api.comparisons``."""

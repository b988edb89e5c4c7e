"""Experiments: several variants of a target tried on one suite together, and the honest
answer to "which could be the best, at what cost" (docs/statistics.md, "Experiments").

``start`` writes an experiment and its runs; ``decision`` reads the best set, the cheapest
variant within it and the Pareto front from the variants' trials."""

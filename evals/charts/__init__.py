"""Server-rendered SVG charts: the one home of chart geometry (scales, ticks, marks, labels that
fit). Each module returns plain data (pixel positions, texts) that a template under
``templates/evals/fragments/`` draws with autoescaping; nothing here writes markup.

``svg``: scales, ticks, approximate text width, label fitting; ``forest``: per-case effects
of a comparison; ``trend``: a suite's pass rate over its runs; ``pareto``: quality against
cost per trial with the front. Accessibility rules every chart follows: docs/charts.md."""

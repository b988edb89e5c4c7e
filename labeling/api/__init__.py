"""API of labeling: calibration sets (with their figures), the calibration export, labels
and submitting a label. Thin: parse, call one service or selector, render.

Who sees what mirrors the UI (``labeling.views``, ``judges.views``):
- calibration sets, list and detail: every role; the calibration figures (judge verdicts
  against human labels) only for engineers and leads, as on the calibration page. A reviewer
  gets ``calibration: null`` with the reason: reviewers label blind;
- the calibration export (judge verdicts and every label): engineers and leads;
- labels: leads and engineers see every label; a reviewer sees only their own (the queue
  never shows another reviewer's label); outsiders nothing;
- submitting a label: reviewers and leads (``label_submit`` checks the same roles).
"""

"""HTML views for calibration sets and the reviewer's labeling queue: thin, they call
labeling's concept modules (``labeling.labels``, ...) / selectors and render.

Permissions (the cast in tests/conftest.py; the services check the same roles again):
- calibration sets, list and detail: every role (``VIEWER_ROLES``); the detail shows the
  trials and how many reviewers labeled each, never verdicts, so a reviewer stays blind;
- building a set, adding/removing items and editing its guidelines for reviewers
  (Markdown, shown in the queue): engineers and leads;
- the queue, saving and undoing labels: reviewers and leads (``LABELER_ROLES``); engineers
  and outsiders get 403 (the domain's ``label_submit`` allows the same two roles);
- adjudication (trials where reviewers disagree, and the decision): leads only, since the
  page shows every reviewer's verdict (``adjudication_record`` checks the same role);
- improving a judge with few-shot examples (``judge_improve``): leads only, as
  ``labeling.improve.judge_version_improve`` (it shows every reviewer's critique and
  chooses what a judge is taught); versions side by side: engineers and leads.
The queue is blind: it never shows a grade, a judge verdict or another reviewer's label.
"""

"""HTML views for calibration sets, the queue, adjudication and improving a judge. Roles as
the services check them: sets, every role; building sets, engineers and leads; the queue,
reviewers and leads; adjudication and improving, leads. The queue is blind.
"""

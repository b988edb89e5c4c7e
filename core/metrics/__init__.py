"""Prometheus metrics (docs/operations.md): the counters every process writes to one folder
(prometheus_client's multiprocess mode, ``core.metrics.store``), what the database says at
scrape time (``core.metrics.exposition``: sources registered by each app), and who may read
them (``core.metrics.access``). Each app defines its own instruments in its ``metrics``
module; this package imports no domain app, and nothing in it imports prometheus_client
before ``config.settings`` has set ``PROMETHEUS_MULTIPROC_DIR``."""

"""What ``/metrics`` answers: the counters and histograms of every process on this machine
(``core.metrics.store``) and the gauges read from the database at scrape time, from the
sources the apps register (``metrics_source_register`` in their ``AppConfig.ready``: core
its own in ``core.metrics.gauges``, evals its queue). A source that fails is left out of
that scrape and reported as ``assay_metrics_source_up{source} 0``, never as zeros."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from core.metrics.store import metrics_compact, metrics_dir, metrics_read_lock

logger = logging.getLogger(__name__)

# A source reads the database (a few indexed queries) and returns its metric families.
Source = Callable[[], Iterable[Metric]]

_sources: dict[str, Source] = {}

# What generate_latest writes.
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


def metrics_source_register(name: str, source: Source) -> None:
    """Add ``source`` to every scrape under ``name`` (registering a name again replaces it)."""
    _sources[name] = source


def metrics_source_names() -> list[str]:
    """The registered sources' names, sorted."""
    return sorted(_sources)


class _SourcesCollector(Collector):
    """Every registered source, each one's failure reported apart."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "assay_metrics_source_up",
            "1 when the source's gauges were read at this scrape, 0 when it failed (logged).",
            labels=["source"],
        )
        took = GaugeMetricFamily(
            "assay_metrics_source_seconds",
            "Seconds the source took to read at this scrape.",
            labels=["source"],
        )
        for name in sorted(_sources):
            started = time.perf_counter()
            try:
                families = list(_sources[name]())
            except Exception:  # noqa: BLE001 - one failing source must not hide the others
                logger.exception("metrics source %s failed", name)
                up.add_metric([name], 0.0)
                families = []
            else:
                up.add_metric([name], 1.0)
            took.add_metric([name], time.perf_counter() - started)
            yield from families
        yield up
        yield took


def metrics_text() -> bytes:
    """The Prometheus text exposition (format 0.0.4, ``CONTENT_TYPE``) of every process's
    counters and the registered sources' gauges; dead processes' files are folded first."""
    folder = metrics_dir()
    metrics_compact(folder)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(folder))
    registry.register(_SourcesCollector())
    with metrics_read_lock(folder):
        return generate_latest(registry)

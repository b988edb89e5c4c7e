import importlib

from django.apps import AppConfig

# What a worker's first chunk imports (the runner, its targets' HTTP client, the graders):
# imported when the worker is ready, so the first run's first call is not held up by
# imports (bench/bench_start.py). The judge task is imported with Django's setup, by the
# judge rung the judges app registers (judges.rung).
# aiohttp: the targets' HTTP client imports it with its first call (providers/transport.py).
# evals.comparison.summary (scipy): every run's close stores its summary; imported at the
# first close instead, it held a solo worker ~0.7 s while the next run waited for its
# first call (bench_start.py: commit -> first call 0.74-0.78 s on the run after a close).
WORKER_WARM_MODULES = (
    "evals.runner.execute",
    "aiohttp",
    "evals.comparison.summary",
)


def worker_warm_up(**kwargs) -> None:
    """Import ``WORKER_WARM_MODULES`` and build the process's SSL context (the CA bundle's
    load, tens of ms), on Celery's ``worker_ready`` in a solo worker and
    ``worker_process_init`` in each prefork child."""
    for module in WORKER_WARM_MODULES:
        importlib.import_module(module)
    transport = importlib.import_module("providers.transport")
    transport.ssl_context_shared()


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The runs' gauges on /metrics (core.metrics.exposition, evals.metrics).
        from core.metrics.exposition import metrics_source_register  # noqa: PLC0415
        from evals.metrics import evals_gauges  # noqa: PLC0415

        metrics_source_register("evals", evals_gauges)

        from celery.signals import worker_process_init, worker_ready  # noqa: PLC0415

        worker_ready.connect(worker_warm_up, dispatch_uid="evals.worker_warm_up", weak=False)
        worker_process_init.connect(
            worker_warm_up, dispatch_uid="evals.worker_warm_up.child", weak=False
        )

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Core"

    def ready(self) -> None:
        # The functions configs may name, loaded once per process (web, worker, commands):
        # ASSAY_REGISTRIES and the assay.registry entry points (core.registry).
        from django.conf import settings  # noqa: PLC0415

        from core.registry import registry_install, registry_load  # noqa: PLC0415

        registry_install(registry_load(modules=settings.ASSAY.get("REGISTRIES", ())))

        # Connected at start-up: the user model is only importable once apps are ready.
        from django.contrib.auth import get_user_model  # noqa: PLC0415
        from django.db.models.signals import m2m_changed  # noqa: PLC0415

        from core.roles import forget_roles  # noqa: PLC0415

        def groups_changed(sender: object, instance: object, **kwargs: object) -> None:
            forget_roles(instance)  # a user's cached role names (core.roles.user_roles)

        m2m_changed.connect(
            groups_changed,
            sender=get_user_model().groups.through,
            dispatch_uid="core.roles.forget_roles",
            weak=False,
        )

        # Core's gauges on /metrics: heartbeats, outbox, broker (core.metrics.gauges).
        from core.metrics.exposition import metrics_source_register  # noqa: PLC0415
        from core.metrics.gauges import core_gauges  # noqa: PLC0415

        metrics_source_register("core", core_gauges)

        from celery.signals import celeryd_init, worker_ready, worker_shutdown  # noqa: PLC0415

        from core import heartbeat  # noqa: PLC0415
        from core.worker_privileges import worker_root_warning_settle  # noqa: PLC0415

        celeryd_init.connect(
            worker_root_warning_settle, dispatch_uid="core.worker_privileges", weak=False
        )

        def worker_started(sender: object = None, **kwargs: object) -> None:
            heartbeat.heartbeat_thread_start(hostname=getattr(sender, "hostname", "celery"))

        def worker_stopping(**kwargs: object) -> None:
            heartbeat.heartbeat_thread_stop()

        worker_ready.connect(worker_started, dispatch_uid="core.heartbeat.start", weak=False)
        worker_shutdown.connect(worker_stopping, dispatch_uid="core.heartbeat.stop", weak=False)

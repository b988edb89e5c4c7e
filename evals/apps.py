from django.apps import AppConfig


class EvalsConfig(AppConfig):
    name = "evals"
    verbose_name = "Evals"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import m2m_changed

        from .roles import forget_roles

        def groups_changed(sender, instance, **kwargs) -> None:
            forget_roles(instance)  # a user's cached role names (evals.roles.user_roles)

        m2m_changed.connect(
            groups_changed,
            sender=get_user_model().groups.through,
            dispatch_uid="evals.roles.forget_roles",
            weak=False,
        )

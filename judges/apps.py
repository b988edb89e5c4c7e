from django.apps import AppConfig


class JudgesConfig(AppConfig):
    name = "judges"
    verbose_name = "Judges"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # evals reaches the judge rung through its registry only (it imports nothing of
        # judges): register this app's implementation of it.
        from evals.grading.grader_set import JUDGE_KIND  # noqa: PLC0415
        from evals.grading.rungs import rung_register  # noqa: PLC0415
        from judges.rung import JUDGES_RUNG  # noqa: PLC0415

        rung_register(kind=JUDGE_KIND, rung=JUDGES_RUNG)

"""The shapes of statistics in API responses: a confusion matrix, Cohen's kappa with its
interval, a rate with its Wilson interval (every calibration and approval answer uses them)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers


class ConfusionSerializer(serializers.Serializer[Any]):
    judge_pass_human_pass = serializers.IntegerField(help_text="Judge pass, human pass (trials).")
    judge_pass_human_fail = serializers.IntegerField(
        help_text="Judge pass, human fail: false accepts (trials)."
    )
    judge_fail_human_pass = serializers.IntegerField(
        help_text="Judge fail, human pass: false rejects (trials)."
    )
    judge_fail_human_fail = serializers.IntegerField(help_text="Judge fail, human fail (trials).")


class KappaSerializer(serializers.Serializer[Any]):
    kappa = serializers.FloatField(
        allow_null=True, help_text="Cohen's kappa (-1..1); null when undefined (see reason)."
    )
    se = serializers.FloatField(
        allow_null=True,
        help_text="Large-sample standard error of "
        "kappa (Fleiss-Cohen-Everitt); null when undefined.",
    )
    ci_low = serializers.FloatField(
        allow_null=True, help_text="Lower end of the 95% interval of kappa; null when undefined."
    )
    ci_high = serializers.FloatField(
        allow_null=True, help_text="Upper end of the 95% interval of kappa; null when undefined."
    )
    agreement = serializers.FloatField(
        allow_null=True, help_text="Observed agreement p_o (fraction 0..1); null when n = 0."
    )
    expected = serializers.FloatField(
        allow_null=True, help_text="Chance agreement p_e (fraction 0..1); null when n = 0."
    )
    n = serializers.IntegerField(help_text="Pairs compared (trials).")
    reason = serializers.CharField(help_text="Why kappa is undefined (empty when defined).")


class RateSerializer(serializers.Serializer[Any]):
    rate = serializers.FloatField(
        allow_null=True,
        help_text="numerator / denominator (fraction 0..1); null when the denominator is 0.",
    )
    numerator = serializers.IntegerField(help_text="Trials counted (count).")
    denominator = serializers.IntegerField(help_text="Trials in the condition (count).")
    ci_low = serializers.FloatField(
        allow_null=True, help_text="Wilson 95% interval, lower end (fraction); null when undefined."
    )
    ci_high = serializers.FloatField(
        allow_null=True, help_text="Wilson 95% interval, upper end (fraction); null when undefined."
    )
    reason = serializers.CharField(help_text="Why the rate is undefined (empty when defined).")

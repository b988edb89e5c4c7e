"""The improvement loop: few-shot examples from disagreements, versions compared."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, form_error, role_required
from core.roles import LEAD
from judges.models import Judge
from labeling import improve
from labeling.forms import JudgeImproveForm
from labeling.views._common import CALIBRATION_ROLES, _calibration_url, _scope, _version_or_404


@unstorable_shown_on_form
@require_http_methods(["GET", "POST"])
@role_required(LEAD)
def judge_improve(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Build an improved version (leads, as ``judge_version_improve``): pick disagreements of
    ``?set=<uuid>`` (else every labeled trial) as examples, edit, preview, create.
    """
    version = _version_or_404(version_id)
    cset, _suite = _scope(request)
    cal, candidates = improve.improve_candidates(base_version=version, calibration_set=cset)
    choices = [(c.choice, c.disagreement.case_key) for c in candidates]
    context: dict[str, Any] = {
        "version": version,
        "cset": cset,
        "cal": cal,
        "candidates": candidates,
        "improvable": version.judge.kind in improve.IMPROVABLE_KINDS,
        "inherited": len(version.params.get("examples") or []),
    }
    if request.method == "GET":
        form = JudgeImproveForm(
            choices=choices,
            initial={"prompt_template": improve.improved_template_default(base_version=version)},
        )
        return render(request, "labeling/judge_improve.html", {**context, "form": form})
    form = JudgeImproveForm(request.POST, choices=choices)
    status = 400
    if form.is_valid():
        args = {
            "base_version": version,
            "label_ids": form.label_ids(),
            "prompt_template": form.cleaned_data["prompt_template"],
        }
        try:
            if form.cleaned_data["action"] == "preview":
                context["preview"] = improve.improve_preview(**args)
                status = 200
            else:
                new = improve.judge_version_improve(**args, by=request.user)
                messages.success(
                    request,
                    f"Created {new}: {len(args['label_ids'])} chosen label(s) recorded as its "
                    "development data; its calibration uses held-out labels only.",
                )
                return redirect(_calibration_url(new, cset))
        except DomainError as exc:
            if exc.field == "label_ids":
                form.add_error("examples", str(exc))
            else:
                form_error(form, exc)
    return render(request, "labeling/judge_improve.html", {**context, "form": form}, status=status)


@require_GET
@role_required(*CALIBRATION_ROLES)
def judge_versions_compare(request: HtmxHttpRequest, judge_id) -> HttpResponse:
    """A judge's versions side by side on the same held-out items (``versions_compare``)."""
    judge = get_object_or_404(Judge, uuid=judge_id)
    comparison = improve.versions_compare(judge=judge)
    return render(request, "labeling/judge_versions_compare.html", {"cmp": comparison})


# --- preferences on pairwise judge runs -------------------------------------------------------

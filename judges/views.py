"""HTML views for judges: the list with trust state, the calibration page, and the lead's
approval and revocation. Thin: they call ``labeling.selectors`` / ``labeling.services``.

Permissions (the cast in tests/conftest.py; the services check the approval roles again):
- the judge list and the calibration page: engineers and leads. Reviewers get 403: the
  calibration page shows judge verdicts and reasons, and a reviewer who has seen them
  would no longer label blind; outsiders get 403 like everywhere;
- "Mark trusted" and "Revoke trust": leads only.
"""

from __future__ import annotations

import dataclasses

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.http import HtmxHttpRequest, role_required
from core.roles import ENGINEER, LEAD, user_has_role
from evals.models import Suite
from judges.models import Judge, JudgeApproval, JudgeVersion
from judges.selectors import judge_cost_get, position_bias_list
from labeling import selectors as calibration_selectors
from labeling import services as labeling_services
from labeling.figures import Confusion
from labeling.forms import TrustApproveForm, TrustRevokeForm
from labeling.models import CalibrationSet

CALIBRATION_ROLES = (ENGINEER, LEAD)


def _version_or_404(version_id) -> JudgeVersion:
    return get_object_or_404(JudgeVersion.objects.select_related("judge"), uuid=version_id)


@require_GET
@role_required(*CALIBRATION_ROLES)
def judge_list(request: HtmxHttpRequest) -> HttpResponse:
    """Judges and their versions, each with its trust state, cost so far, position bias
    (pairwise versions with verdicts) and calibration links."""
    judges = Judge.objects.prefetch_related("versions")
    active = {
        a.judge_version_id: a
        for a in JudgeApproval.objects.filter(revoked_at__isnull=True).select_related("approved_by")
    }
    sets: dict[int, list[CalibrationSet]] = {}
    for cset in CalibrationSet.objects.filter(judge_version__isnull=False):
        sets.setdefault(cset.judge_version_id, []).append(cset)
    bias = {b.judge_version_id: b for b in position_bias_list()}
    rows = [
        {
            "judge": judge,
            "versions": [
                {
                    "version": v,
                    "approval": active.get(v.id),
                    "sets": sets.get(v.id, []),
                    "cost": judge_cost_get(judge_version=v),
                    "bias": bias.get(v.id),
                }
                for v in judge.versions.all()
            ],
        }
        for judge in judges
    ]
    return render(request, "judges/judge_list.html", {"rows": rows})


def _scope(request: HtmxHttpRequest) -> tuple[CalibrationSet | None, Suite | None]:
    set_id, suite_id = request.GET.get("set"), request.GET.get("suite")
    cset = suite = None
    if set_id:
        cset = get_object_or_404(CalibrationSet.objects.select_related("suite", "run"), uuid=set_id)
    elif suite_id:
        suite = get_object_or_404(Suite, uuid=suite_id)
    return cset, suite


@require_GET
@role_required(*CALIBRATION_ROLES)
def calibration(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """A judge version's calibration: ``?set=<uuid>`` on a calibration set, ``?suite=<uuid>``
    over every labeled trial of a suite, neither: over every labeled trial.

    Pointwise judges: ``calibration_compute`` and ``human_agreement`` (the ceiling);
    pairwise judges: ``pairwise_calibration_compute`` (set scope uses the set's suite).
    "Mark trusted" is offered on the set and all-trials scopes, which are what
    ``judge_trust_approve`` records; a suite scope links to the all-trials scope.
    """
    version = _version_or_404(version_id)
    cset, suite = _scope(request)
    approval = calibration_selectors.active_approval_get(judge_version=version)
    context = {
        "version": version,
        "cset": cset,
        "suite": suite,
        "approval": approval,
        "is_lead": user_has_role(request.user, LEAD),
        "history": version.approvals.select_related("approved_by", "revoked_by")[:10],
        "trusted_siblings": [
            v for v in version.judge.versions.all() if v.id != version.id and v.is_trusted
        ],
        "sets": CalibrationSet.objects.filter(judge_version=version),
        "revoke_form": TrustRevokeForm(),
    }
    # Imported pairwise judges are of kind "recorded": their verdicts say what they are.
    if version.judge.kind == Judge.Kind.PAIRWISE or version.pairwise_verdicts.exists():
        context["pairwise"] = calibration_selectors.pairwise_calibration_compute(
            judge_version=version, suite=suite or (cset.suite if cset else None)
        )
        return render(request, "judges/calibration.html", context)
    figures = calibration_selectors.calibration_compute(
        judge_version=version, calibration_set=cset, suite=suite
    )
    ceiling = calibration_selectors.human_agreement(calibration_set=cset, suite=suite)
    context.update(
        {
            "cal": figures,
            "ceiling": ceiling,
            "approve_form": TrustApproveForm(
                initial={
                    "calibration_set": cset.uuid if cset else None,
                    "n": figures.n,
                    "n_judge_errors": figures.n_judge_errors,
                    **dataclasses.asdict(figures.confusion),
                }
            ),
            "can_approve_scope": suite is None,
        }
    )
    return render(request, "judges/calibration.html", context)


def _calibration_url(version: JudgeVersion, cset: CalibrationSet | None) -> str:
    url = reverse("judges:calibration", kwargs={"version_id": version.uuid})
    return f"{url}?set={cset.uuid}" if cset else url


@require_POST
@role_required(LEAD)
def trust_approve(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Mark the version trusted (``judge_trust_approve``) on the scope and figures the lead
    saw; the service recomputes them and refuses when the thresholds fail or they changed."""
    version = _version_or_404(version_id)
    form = TrustApproveForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not approved: the form was incomplete; reload the page.")
        return redirect(_calibration_url(version, None))
    data = form.cleaned_data
    cset = (
        get_object_or_404(CalibrationSet, uuid=data["calibration_set"])
        if data["calibration_set"]
        else None
    )
    current = calibration_selectors.calibration_compute(judge_version=version, calibration_set=cset)
    shown = dataclasses.replace(
        current,
        n=data["n"],
        n_judge_errors=data["n_judge_errors"],
        confusion=Confusion(**{f.name: data[f.name] for f in dataclasses.fields(Confusion)}),
    )
    try:
        labeling_services.judge_trust_approve(
            judge_version=version, by=request.user, calibration_set=cset, figures=shown
        )
    except labeling_services.LabelingError as exc:
        messages.error(request, f"Not approved: {exc}.")
    else:
        messages.success(request, f"{version} is trusted.")
    return redirect(_calibration_url(version, cset))


@require_POST
@role_required(LEAD)
def trust_revoke(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Revoke the version's trust (``judge_trust_revoke``); a reason is required."""
    version = _version_or_404(version_id)
    form = TrustRevokeForm(request.POST)
    back = request.POST.get("set") or ""
    cset = CalibrationSet.objects.filter(uuid=back).first() if _is_uuid(back) else None
    if not form.is_valid():
        messages.error(request, "Not revoked: give a reason for revoking trust.")
        return redirect(_calibration_url(version, cset))
    try:
        labeling_services.judge_trust_revoke(
            judge_version=version, by=request.user, reason=form.cleaned_data["reason"]
        )
    except labeling_services.LabelingError as exc:
        messages.error(request, f"Not revoked: {exc}.")
    else:
        messages.success(request, f"Trust in {version} revoked.")
    return redirect(_calibration_url(version, cset))


def _is_uuid(raw: str) -> bool:
    import uuid

    try:
        uuid.UUID(raw)
    except ValueError:
        return False
    return True

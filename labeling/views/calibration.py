"""A judge version's calibration page, and the lead's trust approval and revocation."""

from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from core.errors import DomainError
from core.forms import unstorable_shown_on_form
from core.http import HtmxHttpRequest, form_error, role_required
from core.ids import uuid_parse
from core.roles import LEAD, user_has_role
from evals.models import Suite
from judges import trust
from judges.models import JudgeVersion
from labeling import improve
from labeling import selectors as calibration_selectors
from labeling.approval import judge_trust_approve
from labeling.figures import Confusion
from labeling.forms import PairwiseTrustApproveForm, TrustApproveForm, TrustRevokeForm
from labeling.models import CalibrationSet
from labeling.pairwise import is_pairwise
from labeling.views._common import CALIBRATION_ROLES, _calibration_url, _scope, _version_or_404


@require_GET
@role_required(*CALIBRATION_ROLES)
def calibration(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """A judge version's calibration on ``?set=<uuid>``, ``?suite=<uuid>`` or every labeled
    trial. "Mark trusted" is offered on the set and all-trials scopes (what
    ``judge_trust_approve`` records); a suite scope links to the all-trials one.
    """
    version = _version_or_404(version_id)
    cset, suite = _scope(request)
    return _calibration_page(request, version, cset=cset, suite=suite)


def _calibration_page(
    request: HtmxHttpRequest,
    version: JudgeVersion,
    *,
    cset: CalibrationSet | None,
    suite: Suite | None,
    revoke_form: TrustRevokeForm | None = None,
) -> HttpResponse:
    """Render the calibration page; ``revoke_form``: a refused revocation's bound form."""
    approval = trust.active_approval_get(judge_version=version)
    context: dict[str, Any] = {
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
        "revoke_form": revoke_form
        or TrustRevokeForm(initial={"approval": approval.uuid if approval else None}),
        "n_development_total": improve.development_count(judge_version=version),
        "improvable": version.judge.kind in improve.IMPROVABLE_KINDS,
    }
    # Figures an approval was granted on must have held the development trials out; any
    # other approval's figures are not shown as "trusted" figures (trust_grant refuses them).
    context["approval_on_development"] = bool(
        approval
        and context["n_development_total"]
        and approval.figures.get("n_development_total") != context["n_development_total"]
    )
    if is_pairwise(version):
        scope_suite = suite or (cset.suite if cset else None)
        pairwise = calibration_selectors.pairwise_calibration_compute(
            judge_version=version, suite=scope_suite
        )
        context["pairwise"], context["scope_suite"] = pairwise, scope_suite
        context["approve_form"] = PairwiseTrustApproveForm(
            initial={
                "suite": scope_suite.uuid if scope_suite else None,
                "n": pairwise.n,
                "agreement_numerator": pairwise.agreement_numerator,
                "n_inconsistent": pairwise.n_inconsistent,
                "n_judge_errors": pairwise.n_judge_errors,
                "n_unresolved": pairwise.n_unresolved,
            }
        )
        return render(request, "labeling/calibration.html", context)
    figures = calibration_selectors.calibration_compute(
        judge_version=version, calibration_set=cset, suite=suite
    )
    ceiling = calibration_selectors.human_agreement(calibration_set=cset, suite=suite)
    revised, by_guidelines = calibration_selectors.calibration_label_notes(
        judge_version=version, calibration_set=cset, suite=suite
    )
    context.update(
        {
            "revised": revised,
            "by_guidelines": by_guidelines,
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
    return render(request, "labeling/calibration.html", context)


@require_POST
@role_required(LEAD)
def trust_approve(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Mark the version trusted (``judge_trust_approve``) on the scope and figures the lead saw."""
    version = _version_or_404(version_id)
    if is_pairwise(version):
        return _pairwise_trust_approve(request, version)
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
        judge_trust_approve(
            judge_version=version, by=request.user, calibration_set=cset, figures=shown
        )
    except DomainError as exc:
        messages.error(request, f"Not approved: {exc}.")
    else:
        messages.success(request, f"{version} is trusted.")
    return redirect(_calibration_url(version, cset))


def _pairwise_trust_approve(request: HtmxHttpRequest, version: JudgeVersion) -> HttpResponse:
    form = PairwiseTrustApproveForm(request.POST)
    url = reverse("labeling:calibration", kwargs={"version_id": version.uuid})
    if not form.is_valid():
        messages.error(request, "Not approved: the form was incomplete; reload the page.")
        return redirect(url)
    data = form.cleaned_data
    suite = get_object_or_404(Suite, uuid=data["suite"]) if data["suite"] else None
    if suite is not None:
        url = f"{url}?suite={suite.uuid}"
    current = calibration_selectors.pairwise_calibration_compute(judge_version=version, suite=suite)
    shown = dataclasses.replace(current, **{k: v for k, v in data.items() if k != "suite"})
    try:
        judge_trust_approve(judge_version=version, by=request.user, suite=suite, figures=shown)
    except DomainError as exc:
        messages.error(request, f"Not approved: {exc}.")
    else:
        messages.success(request, f"{version} is trusted.")
    return redirect(url)


@unstorable_shown_on_form
@require_POST
@role_required(LEAD)
def trust_revoke(request: HtmxHttpRequest, version_id) -> HttpResponse:
    """Revoke the approval the page showed (``judges.trust.trust_revoke``). A refused reason: the
    page again with the error and the typed text; an approval that is not the active one: the
    page with the current approval, the reason kept (409). Nothing is revoked then.
    """
    version = _version_or_404(version_id)
    form = TrustRevokeForm(request.POST)
    back = form.data.get("set") or ""
    sets = CalibrationSet.objects.select_related("suite", "run")
    cset = sets.filter(uuid=back).first() if uuid_parse(back) else None
    if not form.is_valid():
        return _calibration_page(request, version, cset=cset, suite=None, revoke_form=form)
    try:
        trust.trust_revoke(
            judge_version=version,
            by=request.user,
            reason=form.cleaned_data["reason"],
            approval_uuid=form.cleaned_data["approval"],
        )
    except DomainError as exc:
        if exc.field != "approval" or exc.extra["current_approval"] is None:
            messages.error(request, f"Not revoked: {exc}.")
            return redirect(_calibration_url(version, cset))
        data = request.POST.copy()  # the form moves to the approval now, the reason kept
        data["approval"] = exc.extra["current_approval"]
        form = TrustRevokeForm(data)
        form.is_valid()
        form_error(form, exc)
        page = _calibration_page(request, version, cset=cset, suite=None, revoke_form=form)
        page.status_code = 409
        return page
    else:
        messages.success(request, f"Trust in {version} revoked.")
    return redirect(_calibration_url(version, cset))

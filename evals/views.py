"""HTML views for runs: thin, they call selectors and services and render."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from .models import Run


@require_GET
def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.select_related("suite").all()[:200]
    return render(request, "evals/run_list.html", {"runs": runs})


@require_GET
def run_detail(request: HttpRequest, run_id) -> HttpResponse:
    run = get_object_or_404(Run.objects.select_related("suite"), uuid=run_id)
    return render(request, "evals/run_detail.html", {"run": run})

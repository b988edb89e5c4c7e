"""The upload form of the import page: file, suite, run, format, mapping, threshold."""

from __future__ import annotations

from django import forms

from core.errors import DomainError
from core.forms import StorableForm
from evals.models import Suite
from interop.importers.tabular import FIELDS, mapping_parse


class ImportUploadForm(StorableForm):
    """Parses the upload's options; ``cleaned_data["mapping"]`` is a dict field -> column."""

    file = forms.FileField(
        help_text="Labeled records (.jsonl), CSV or JSONL results, a promptfoo "
        "results.json or an Inspect AI JSON log; UTF-8."
    )
    suite = forms.CharField(max_length=200, help_text="Suite name; created when missing.")
    run = forms.CharField(max_length=196, help_text="A new run name in that suite.")
    format = forms.ChoiceField(
        choices=[
            ("", "detect"),
            ("labeled", "labeled records"),
            ("csv", "CSV"),
            ("jsonl", "JSONL"),
            ("promptfoo", "promptfoo results (-o results.json)"),
            ("inspect", "Inspect AI log (--log-format json)"),
        ],
        required=False,
    )
    suite_kind = forms.ChoiceField(
        choices=Suite.Kind.choices, initial=Suite.Kind.REGRESSION, help_text="Kind of a new suite."
    )
    mapping = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "class": "mono"}),
        help_text="CSV/JSONL only: one field=column per line, e.g. case_id=id; empty: a "
        "column named like a field maps to it. Fields: " + ", ".join(FIELDS) + ". A failed "
        "row is status=error with its error message: an errored trial, never graded "
        "(status is ok, error or cancelled; a given mapping must map a column named status "
        "or error).",
    )
    threshold = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        help_text="Pass threshold for rows with a score but no verdict.",
    )

    def clean_mapping(self) -> dict[str, str]:
        try:
            return mapping_parse(self.cleaned_data["mapping"].splitlines())
        except DomainError as exc:
            raise forms.ValidationError(str(exc)) from None

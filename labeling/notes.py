"""Notes on calibration items: one thread per item between its reviewers and the leads
(docs/labeling.md, "Notes on items").

Who reads a note (``notes_visible_q``, the one rule every path applies: the queue page and
its htmx fragments, ``GET /api/calibration-sets/<uuid>/items/<id>/notes``, the set page's
open questions; exports carry no notes; the admin is for superusers):

- its author, always;
- leads (and superusers), always;
- any other reviewer only while they hold a label of record on the item's trial. A reviewer
  who has not labeled it, or who undid their label (the ``Label`` row is gone), sees only
  their own notes: a note may name a verdict, and people write them, so the rule is on
  visibility, not on content.

Engineers are not part of the thread (they do not label): the pages and the API answer 403.
Who writes: reviewers and leads, on any item of a set, before or after labeling it (a
question is asked before). Text: Markdown shown through ``core.markdown.markdown_html``;
empty, over ``TEXT_MAX_CHARS["note"]`` or holding NUL or a lone surrogate is refused the
same way on every path (``DomainError`` on ``text``).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Exists, F, Max, OuterRef, Q

from core.bounds import text_problem
from core.errors import DomainError
from core.roles import LEAD, REVIEWER, role_require, user_has_role
from core.text import unstorable_refuse
from labeling.models import CalibrationItem, CalibrationSet, ItemNote, Label


def sees_every_note(user) -> bool:
    """True for leads and superusers: every note of every item."""
    return user_has_role(user, LEAD)


def notes_visible_q(user) -> Q:
    """Q on ``ItemNote`` matching the notes ``user`` may read (the module's rule); nothing for
    an anonymous user or one with no labeling role."""
    if not user.is_authenticated or not user_has_role(user, REVIEWER, LEAD):
        return Q(pk__in=[])
    if sees_every_note(user):
        return Q()
    labeled = Label.objects.filter(trial_id=OuterRef("item__trial_id"), reviewer=user)
    return Q(author=user) | Q(Exists(labeled))


def item_notes_get(*, item: CalibrationItem, user) -> list[ItemNote]:
    """The notes of ``item`` ``user`` may read, oldest first, authors loaded (1 query)."""
    return list(
        ItemNote.objects.filter(notes_visible_q(user), item=item)
        .select_related("author")
        .order_by("created_at", "id")
    )


def item_note_add(*, item: CalibrationItem, author, text: str) -> ItemNote:
    """Add ``author``'s note to ``item``'s thread. Raises PermissionDenied unless a reviewer
    or lead; ``DomainError`` (field ``text``, code ``invalid`` or ``too_large``) for empty
    text, text holding NUL or a lone surrogate, or over ``TEXT_MAX_CHARS["note"]``
    characters."""
    role_require(author, REVIEWER, LEAD, action="writing a note")
    if not isinstance(text, str):
        raise DomainError("a note is text", field="text")
    unstorable_refuse(text, field="text")
    problem = text_problem(text, "note")
    if problem:
        raise DomainError(f"a note is too long: {problem}", field="text", code="too_large")
    if not text.strip():
        raise DomainError("a note cannot be empty", field="text")
    return ItemNote.objects.create(
        item=item, author=author, text=text, by_lead=user_has_role(author, LEAD)
    )


@dataclass(frozen=True)
class OpenQuestion:
    """An item whose newest reviewer note has no lead note after it: ``asked_at`` that note's
    time, ``n_notes`` the thread's length."""

    item: CalibrationItem
    asked_at: object
    n_notes: int


def open_questions_get(*, calibration_set: CalibrationSet) -> list[OpenQuestion]:
    """The set's items with an open question (a note by a non-lead with no lead note at or
    after it), in queue order; for leads (every note counts). One query."""
    items = (
        calibration_set.items.annotate(
            last_question=Max("notes__created_at", filter=Q(notes__by_lead=False)),
            last_answer=Max("notes__created_at", filter=Q(notes__by_lead=True)),
            n_notes=Count("notes"),
        )
        .filter(last_question__isnull=False)
        .filter(Q(last_answer__isnull=True) | Q(last_answer__lt=F("last_question")))
        .select_related("trial__case")
        .order_by("position", "id")
    )
    return [OpenQuestion(item, item.last_question, item.n_notes) for item in items]

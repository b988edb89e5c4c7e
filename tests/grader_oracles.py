"""Business-rule oracles used by tests/evals/test_graders.py as ``python`` graders."""

from core.registry import registered
from demo.expense_contract import FIXTURES
from evals.grading.graders import GradeResult


@registered("grader")
def refund_within_limit(case, output: str) -> bool:
    return "refund" in output and "$" not in output


@registered("grader")
def as_dict(case, output: str) -> dict:
    return {"passed": output == "ok", "score": 0.5, "reason": "checked by as_dict"}


@registered("grader")
def as_result(case, output: str) -> GradeResult:
    return GradeResult(passed=False, score=0.25, reason="policy 7 violated")


@registered("grader")
def raises(case, output: str) -> bool:
    raise KeyError("policy_id")


@registered("grader")
def returns_none(case, output: str):
    return None


@registered("grader")
def nan_score(case, output: str) -> dict:
    return {"passed": True, "score": float("nan")}


NOT_CALLABLE = 3


@registered("oracle")
def item_oracle_none(item: dict):
    """A broken contract oracle: returns nothing."""
    return None


@registered("pipeline")
def contract_fixture(case, **settings) -> str:
    """A callable target answering the contract development fixture named by the case's
    input (``demo.expense_contract.FIXTURES``)."""
    return FIXTURES[case.input]


@registered("oracle")
def exits(item: dict):
    """A contract oracle that calls sys.exit: an errored grade, never a worker exit."""
    import sys  # noqa: PLC0415 - the test's own behaviour

    sys.exit(3)

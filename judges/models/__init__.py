"""The judges app's models, one module per concept: judges, their versions and the approval
that trusts one (``versions``), pairwise verdicts (``pairwise``), judge and probe runs
(``runs``), development data (``development``), call claims and the call ledger (``calls``).
"""

from judges.models.calls import JudgeCallRecord, JudgeClaim
from judges.models.development import DevelopmentLabel
from judges.models.pairwise import PairwiseVerdict
from judges.models.runs import JudgeRun, ProbeRun
from judges.models.versions import Judge, JudgeApproval, JudgeVersion

__all__ = [
    "DevelopmentLabel",
    "Judge",
    "JudgeApproval",
    "JudgeCallRecord",
    "JudgeClaim",
    "JudgeRun",
    "JudgeVersion",
    "PairwiseVerdict",
    "ProbeRun",
]

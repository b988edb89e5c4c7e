"""A run's grader set, typed: read once from its stored JSON as a ``GraderSet``
(``Run.grader_set``). A stored set was checked when its run started (or was imported), so
``from_stored`` reads it leniently and never raises; a new set's strict parse is
``evals.grading.grader_config.parse_grader_specs``."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GraderSpec:
    """One grader in a run's grader set: ``key`` (unique in the set, stored as ``Grade.grader``),
    ``kind`` (in ``GRADERS``), ``config``, and ``gating`` (the trial's verdict needs it)."""

    key: str
    kind: str
    config: dict = field(default_factory=dict)
    gating: bool = True
    version: str = "1"

    @property
    def is_judge(self) -> bool:
        """True for the judge rung (graded by the judges app, not ``run_grader``)."""
        return self.kind == JUDGE_KIND

    @property
    def reads_agent(self) -> bool:
        """True for the agent kinds, which read the trial's trajectory and final state
        (the ladder loads those columns only for them)."""
        return self.kind in AGENT_KINDS


JUDGE_KIND = "judge"
# Agent graders (evals.grading.agent, docs/agents.md): ``state`` grades the outcome,
# ``trajectory`` the path.
STATE_KIND = "state"
TRAJECTORY_KIND = "trajectory"
AGENT_KINDS = (STATE_KIND, TRAJECTORY_KIND)
# Graders that exist only in imported runs: their verdicts were recorded by another harness
# (``imported``; a missing kind reads so) or by a judge that graded there (``recorded-judge``,
# written by ``interop.importers.labeled``). Assay has their grades, not a way to run them.
IMPORTED_KIND = "imported"
RECORDED_JUDGE_KIND = "recorded-judge"
RECORDED_KINDS = (IMPORTED_KIND, RECORDED_JUDGE_KIND)


def recorded_kind_reason(kind: str) -> str:
    """Why a grader of a recorded kind (``RECORDED_KINDS``) cannot be run, for people."""
    if kind == RECORDED_JUDGE_KIND:
        return (
            "a recorded judge: its verdicts were imported with the run; Assay has no prompt "
            "or endpoint to run it"
        )
    return (
        "recorded by the harness the run was imported from; Assay has its verdicts, not a "
        "way to run it"
    )


def default_gating(kind: str) -> bool:
    """Whether ``kind`` gates when its set does not say: every kind but ``trajectory`` (an agent
    trial's verdict is its outcome)."""
    return kind != TRAJECTORY_KIND


@dataclass(frozen=True)
class GraderSet:
    """The graders of a run, in order: ``specs`` (``GraderSpec``), and the views of them
    every reader needs — so no reader walks the stored JSON itself."""

    specs: tuple[GraderSpec, ...] = ()

    @classmethod
    def from_stored(cls, raw: object) -> GraderSet:
        """The set stored on a run or in a run file. Lenient: an entry without a string key is
        skipped; kind defaults to "imported", gating to ``default_gating(kind)``, config to
        ``{}``, version to "1"."""
        specs = []
        for item in raw if isinstance(raw, list) else []:
            if not isinstance(item, dict) or not isinstance(item.get("key"), str):
                continue
            config = item.get("config")
            kind = str(item.get("kind") or IMPORTED_KIND)
            gating = item.get("gating")
            specs.append(
                GraderSpec(
                    key=item["key"],
                    kind=kind,
                    config=config if isinstance(config, dict) else {},
                    gating=gating if isinstance(gating, bool) else default_gating(kind),
                    version=str(item.get("version") or "1"),
                )
            )
        return cls(tuple(specs))

    @property
    def keys(self) -> tuple[str, ...]:
        """Grader keys in set order."""
        return tuple(s.key for s in self.specs)

    @property
    def gating_pairs(self) -> list[tuple[str, bool]]:
        """``(key, gating)`` in set order."""
        return [(s.key, s.gating) for s in self.specs]

    @property
    def gating_keys(self) -> tuple[str, ...]:
        """Keys of the gating graders, sorted (runs with equal tuples share one aggregate)."""
        return tuple(sorted(s.key for s in self.specs if s.gating))

    @property
    def judges(self) -> tuple[GraderSpec, ...]:
        """The judge rung's specs."""
        return tuple(s for s in self.specs if s.is_judge)

    @property
    def deterministic(self) -> tuple[GraderSpec, ...]:
        """Every spec but the judge rung's (graded by ``run_grader`` as trials are written)."""
        return tuple(s for s in self.specs if not s.is_judge)

    @property
    def judge_keys(self) -> tuple[str, ...]:
        return tuple(s.key for s in self.judges)

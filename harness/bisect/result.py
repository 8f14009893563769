"""What a bisection found, as frozen records: each version tried (a run directory, or the
reason it was skipped), and each cell's answer with its evidence. `harness.bisect.output`
writes them as bisect.json and bisect.md."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from packaging.version import Version

from harness.bisect.search import Outcome, Verdict
from harness.bisect.verdict import Target
from harness.bisect.versions import Move

SCHEMA = 1


@dataclass(frozen=True)
class EnvUse:
    """The Python environment a package set ran in (`--isolation env`): its folder, whether
    it was kept from an earlier try or bisection (nothing installed) or made now, and the
    seconds making it took (0 when kept)."""

    path: str
    kept: bool
    seconds: float = 0.0


@dataclass(frozen=True)
class Tried:
    """One package set tried: its label, requirements, the run directory (relative to the
    bisection's folder) and its variant there, or why it was skipped, what pip installed,
    the wall time of the batch it ran in, and what it said about each cell it ran (cell
    label -> verdict); with `--isolation env`, the environment it ran in."""

    label: str
    requirements: tuple[str, ...]
    purpose: str  # "good", "bad", "culprit" or "bisect"
    run: str | None = None
    skipped: str | None = None
    installs: tuple[str, ...] = ()
    seconds: float = 0.0
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    variant: str | None = None
    environment: EnvUse | None = None


@dataclass(frozen=True)
class Evidence:
    """At a cell's boundary: the last good and the first bad record, their graphs' op
    counts that differ, (for a latency finding) the two graphs timed together, and where
    the first bad record went wrong (`harness.store.diagnosis.failing_pass`: the exporter
    pass of its traceback, or the optimizer rule that changed its numbers)."""

    last_good: dict[str, object] | None = None  # the record, with its variant and run
    first_bad: dict[str, object] | None = None
    op_count_diff: dict[str, list[int | None]] = field(default_factory=dict)
    paired: dict[str, object] | None = None
    failing_pass: str | None = None


@dataclass(frozen=True)
class CellAnswer:
    """One cell: the finding bisected, the package blamed, where its search ended, every
    verdict on the way, and the evidence."""

    label: str
    target: Target
    package: str | None
    blame: str
    outcome: Outcome | None = None
    verdicts: tuple[Verdict, ...] = ()
    also: tuple[str, ...] = ()
    evidence: Evidence = Evidence()

    @property
    def answered(self) -> bool:
        o = self.outcome
        return o is not None and o.done and o.first_bad is not None


@dataclass(frozen=True)
class BisectResult:
    moves: tuple[Move, ...]
    criterion: str
    tried: tuple[Tried, ...]
    cells: tuple[CellAnswer, ...]
    command: tuple[str, ...] = ()
    wall_s: float = 0.0
    note: str | None = None  # why nothing was bisected, where nothing was
    # bisected for a fix (`--fix`): each walk runs down from the fixed version, its last
    # good version is the fix and its first bad one the last version before it
    fix: bool = False

    @property
    def package(self) -> str | None:
        """The package blamed for the most cells (the first moved one on a tie)."""
        blamed = Counter(c.package for c in self.cells if c.package)
        if not blamed:
            return self.moves[0].package if len(self.moves) == 1 else None
        order = [m.package for m in self.moves]
        return max(blamed, key=lambda p: (blamed[p], -order.index(p)))

    def headline(self) -> CellAnswer | None:
        """Of the cells blamed on `package`, the one whose first bad version comes first:
        the release that broke something first (with `fix`, the one fixed last)."""
        answered = [c for c in self.cells if c.answered and c.package == self.package]
        return (max if self.fix else min)(answered, key=_first_bad, default=None)

    @property
    def answered(self) -> bool:
        return bool(self.cells) and all(c.answered for c in self.cells)


def _first_bad(cell: CellAnswer) -> Version:
    assert cell.outcome is not None and cell.outcome.first_bad is not None
    return Version(cell.outcome.first_bad)

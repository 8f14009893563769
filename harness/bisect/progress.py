"""Where a bisection stands, as a frozen state and pure transitions (tested with hand-made
states); `harness.bisect.session` runs the package sets each phase asks for and moves the
state on with what they say.

The phases, in order: the good and the bad set run (`ENDPOINTS`); they differ in nothing
to bisect (`NOTHING`, the end), or each target cell is blamed on a package (`BLAME`);
then each blamed cell's search walks its package's versions round by round (`SEARCH`)
until none asks for a version (`ANSWER`: each cell's evidence is gathered)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum

from harness.bisect.culprit import Blame
from harness.bisect.result import CellAnswer, Tried
from harness.bisect.search import Judgement, Search, Verdict, next_round
from harness.bisect.sets import Attempt
from harness.bisect.verdict import Target
from harness.store.records import CellKey

Label = Callable[[CellKey], str]
Wanted = dict[tuple[str, str], list[CellKey]]  # (package, version) -> the cells asking


class Phase(StrEnum):
    ENDPOINTS = "endpoints"
    NOTHING = "nothing"
    BLAME = "blame"
    SEARCH = "search"
    ANSWER = "answer"


@dataclass(frozen=True)
class Progress:
    """The phase, and what the phases before it found: each target cell's finding, its
    blame, its search, and how many search rounds have been judged."""

    phase: Phase = Phase.ENDPOINTS
    found: Mapping[CellKey, Target] = field(default_factory=dict)
    blames: Mapping[CellKey, Blame] = field(default_factory=dict)
    searches: Mapping[CellKey, Search] = field(default_factory=dict)
    rounds: int = 0

    def expect(self, phase: Phase) -> None:
        if self.phase is not phase:
            raise ValueError(f"a bisection in phase {self.phase} cannot take a {phase} step")


def with_targets(progress: Progress, found: Mapping[CellKey, Target]) -> Progress:
    """ENDPOINTS -> BLAME, or NOTHING where the endpoints differ in nothing to bisect."""
    progress.expect(Phase.ENDPOINTS)
    return Progress(Phase.BLAME if found else Phase.NOTHING, dict(found))


def with_blames(
    progress: Progress, blames: Mapping[CellKey, Blame], walks: Mapping[str, tuple[str, ...]]
) -> Progress:
    """BLAME -> SEARCH: each cell blamed on a package searches that package's versions
    (`walks`); a cell blamed on none has no search."""
    progress.expect(Phase.BLAME)
    searches = {k: Search(b.package, walks[b.package]) for k, b in blames.items() if b.package}
    return replace(progress, phase=Phase.SEARCH, blames=dict(blames), searches=searches)


def wanted(progress: Progress) -> Wanted:
    """The versions the searches ask for next (nothing outside SEARCH)."""
    return next_round(progress.searches) if progress.phase is Phase.SEARCH else {}


def with_round(
    progress: Progress, verdicts: Mapping[tuple[str, str], Mapping[CellKey, Verdict]]
) -> Progress:
    """SEARCH -> SEARCH: each search takes its verdict of the round."""
    progress.expect(Phase.SEARCH)
    searches = dict(progress.searches)
    for judged in verdicts.values():
        for key, verdict in judged.items():
            searches[key] = searches[key].with_verdict(verdict)
    return replace(progress, searches=searches, rounds=progress.rounds + 1)


def answered(progress: Progress) -> Progress:
    """SEARCH -> ANSWER, once no search asks for a version."""
    progress.expect(Phase.SEARCH)
    if wanted(progress):
        raise ValueError("a search still asks for a version")
    return replace(progress, phase=Phase.ANSWER)


# -- what the state says -----------------------------------------------------------------------


def cells_so_far(progress: Progress, label: Label) -> list[CellAnswer]:
    """Each target cell as it stands: its blame once known, its search once a round was
    judged."""
    cells = []
    for key, target in progress.found.items():
        b = progress.blames.get(key)
        search = progress.searches.get(key) if progress.rounds else None
        outcome, verdicts = (search.outcome(), search.verdicts) if search else (None, ())
        blame_text = b.reason if b else "not blamed yet"
        package = search.package if search else None
        cells.append(CellAnswer(label(key), target, package, blame_text, outcome, verdicts))
    return cells


def search_progress(progress: Progress, label: Label) -> str:
    parts = []
    for key, s in progress.searches.items():
        lo, hi = s.bounds()
        left = sum(1 for v in s.versions[lo + 1 : hi] if s.verdict(v) is None)
        parts.append(
            f"{label(key)}: {s.versions[lo]} good .. {s.versions[hi]} bad, {left} untried between"
        )
    return "  " + "; ".join(parts)


def endpoint_verdicts(
    attempts: tuple[Attempt, Attempt], found: Mapping[CellKey, Target], label: Label
) -> tuple[dict[str, Verdict], dict[str, Verdict]]:
    """The endpoints' verdicts for the tried log: the good set is the reference, the bad
    set bad for each target cell (by definition)."""
    good, bad = attempts
    return (
        {label(k): Verdict(good.label, Judgement.GOOD, "the reference") for k in found},
        {label(k): Verdict(bad.label, Judgement.BAD, t.message) for k, t in found.items()},
    )


def nothing_found(criterion: str) -> str:
    return f"comparing the good and the bad set finds nothing to bisect on these cells (--finding {criterion})"


def tried(attempt: Attempt, purpose: str, verdicts: Mapping[str, Verdict]) -> Tried:
    """A line of the tried log: a package set that ran (or was skipped) and its verdicts."""
    return Tried(
        attempt.label,
        attempt.requirements,
        purpose,
        attempt.run_dir,
        attempt.skipped,
        attempt.installs,
        attempt.seconds,
        dict(verdicts),
        variant=attempt.variant or None,
        environment=attempt.environment,
    )

"""The bisection itself, per cell: which version to try next and what the tried versions
say, as pure functions of the verdicts so far (tested with hand-made states).

A cell's search walks one package's versions in order; the first is good and the last bad
by definition (the comparison of the two found the finding being bisected). Each round
tries the untried version nearest the middle of the open interval; a version that could
not be tried (not installable, not importable, the cell not measurable there) is skipped,
as `git bisect skip` does, and the next nearest is tried. When no untried version is
left in the interval the search is done: the first bad version is the interval's end, or,
where skipped versions sit just before it, one of those (the answer names them all)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TypeVar

K = TypeVar("K", bound=Hashable)


class Judgement(StrEnum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"


@dataclass(frozen=True)
class Verdict:
    """What one version says about one cell, and why (the finding, or the skip's reason)."""

    version: str
    judgement: Judgement
    reason: str = ""


@dataclass(frozen=True)
class Outcome:
    """Where a search ended: the last good version, the first bad one (None where skipped
    versions hide it; `candidates` are then the versions it can be), and whether it is done."""

    last_good: str
    first_bad: str | None
    candidates: tuple[str, ...]
    done: bool


@dataclass(frozen=True)
class Search:
    """One cell's bisection of one package: its versions in order, the verdicts so far."""

    package: str
    versions: tuple[str, ...]
    verdicts: tuple[Verdict, ...] = ()

    def __post_init__(self) -> None:
        if len(self.versions) < 2:
            raise ValueError("a search needs a good and a bad version")

    def verdict(self, version: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.version == version), None)

    def with_verdict(self, verdict: Verdict) -> Search:
        inner = self.versions[1:-1]
        if verdict.version not in inner:
            raise ValueError(
                f"{verdict.version} is not between {self.versions[0]} and {self.versions[-1]}"
            )
        kept = tuple(v for v in self.verdicts if v.version != verdict.version)
        return replace(self, verdicts=(*kept, verdict))

    def bounds(self) -> tuple[int, int]:
        """(last good index, first bad index after it): the open interval is between."""
        judged = {v.version: v.judgement for v in self.verdicts}
        good = [i for i, v in enumerate(self.versions) if judged.get(v) is Judgement.GOOD]
        lo = max(good, default=0)
        bad = [i for i, v in enumerate(self.versions) if i > lo and judged.get(v) is Judgement.BAD]
        return lo, min(bad, default=len(self.versions) - 1)

    def next_version(self) -> str | None:
        """The untried version nearest the middle of the open interval (the lower of two
        equally near), or None when none is left."""
        lo, hi = self.bounds()
        untried = [i for i in range(lo + 1, hi) if self.verdict(self.versions[i]) is None]
        if not untried:
            return None
        middle = (lo + hi) / 2
        return self.versions[min(untried, key=lambda i: (abs(i - middle), i))]

    def outcome(self) -> Outcome:
        lo, hi = self.bounds()
        skipped = tuple(
            v
            for v in self.versions[lo + 1 : hi]
            if (d := self.verdict(v)) and d.judgement is Judgement.SKIP
        )
        first_bad = None if skipped else self.versions[hi]
        return Outcome(
            last_good=self.versions[lo],
            first_bad=first_bad,
            candidates=(*skipped, self.versions[hi]),
            done=self.next_version() is None,
        )


def next_round(searches: Mapping[K, Search]) -> dict[tuple[str, str], list[K]]:
    """The (package, version) each unfinished search tries next, with the cells trying it:
    cells whose intervals agree share one run."""
    wanted: dict[tuple[str, str], list[K]] = {}
    for key, search in searches.items():
        version = search.next_version()
        if version is not None:
            wanted.setdefault((search.package, version), []).append(key)
    return wanted


def rounds_estimate(versions: int) -> int:
    """The tries a search of `versions` (good and bad included) takes at most, none
    skipped: ceil(log2 of the versions after the good one)."""
    return math.ceil(math.log2(versions - 1)) if versions > 2 else 0

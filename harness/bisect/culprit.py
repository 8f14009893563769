"""Several packages moved at once: which move causes the finding. Each package alone at its
bad version, on top of the good set (every other package at its good version), is tried;
the cell is blamed on the packages whose move alone reproduces the finding, and the first
of them is bisected (on the good set too). Pure: the package sets each run installs, and
the blame from the verdicts."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from harness.bisect.search import Judgement, Verdict
from harness.bisect.versions import Move

K = TypeVar("K")


@dataclass(frozen=True)
class Blame:
    """The package a cell's finding is bisected in (None: no single move causes it), the
    other packages whose move alone also causes it, and why."""

    package: str | None
    also: tuple[str, ...] = ()
    reason: str = ""


def good_set(moves: Sequence[Move]) -> tuple[str, ...]:
    return tuple(m.spec(m.good) for m in moves)


def bad_set(moves: Sequence[Move]) -> tuple[str, ...]:
    return tuple(m.spec(m.bad) for m in moves)


def with_version(moves: Sequence[Move], package: str, version: str) -> tuple[str, ...]:
    """The good set with one package at `version`."""
    return tuple(m.spec(version if m.package == package else m.good) for m in moves)


def blame(
    moves: Sequence[Move], alone: Mapping[str, Mapping[K, Verdict]], cells: Iterable[K]
) -> dict[K, Blame]:
    """Each cell's culprit from `alone[package][cell]`: the verdict of the run with that
    package alone at its bad version. A single package is the culprit without a run."""
    if len(moves) == 1:
        return {c: Blame(moves[0].package, reason="the only package that moved") for c in cells}
    found: dict[K, Blame] = {}
    for cell in cells:
        verdicts = {m.package: alone.get(m.package, {}).get(cell) for m in moves}
        bad = [p for p, v in verdicts.items() if v is not None and v.judgement is Judgement.BAD]
        if bad:
            found[cell] = Blame(
                bad[0], tuple(bad[1:]), f"{bad[0]} alone at its bad version reproduces it"
            )
            continue
        skipped = [p for p, v in verdicts.items() if v is None or v.judgement is Judgement.SKIP]
        reason = (
            "no package alone at its bad version reproduces it: it takes several moves together"
        )
        if skipped:
            reason += f" (not tried alone: {', '.join(skipped)})"
        found[cell] = Blame(None, reason=reason)
    return found

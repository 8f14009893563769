"""One bisection from start to answer, over a `Runner`:

1. the good set and the bad set run every selected cell; `harness compare` of the two
   gives each cell's target (the finding bisected; `harness.bisect.verdict`);
2. where several packages moved, each alone at its bad version on top of the good set runs
   the target cells, and each cell is blamed on a package whose move alone reproduces its
   finding (`harness.bisect.culprit`);
3. each cell's search walks its package's versions on the good set, round by round: the
   versions the searches ask for run (cells asking for the same one share the run), each is
   compared with the good set and judged, until every search is done
   (`harness.bisect.search`);
4. each cell's answer gets its evidence: the last good and first bad records, their op
   count diff, and for a latency finding the two graphs timed together."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TextIO

from harness.bisect.culprit import Blame, bad_set, blame, good_set, with_version
from harness.bisect.result import BisectResult, CellAnswer, Evidence, Tried
from harness.bisect.runner import Attempt, PackageSet, Runner
from harness.bisect.search import Judgement, Search, Verdict, next_round
from harness.bisect.verdict import Criterion, Target, judge, op_count_diff, targets
from harness.bisect.versions import Move
from harness.store.paired import PairResult
from harness.store.records import CellKey, Record
from harness.store.runs import Run

LATENCY = "ort_latency"


class BisectError(Exception):
    """The bisection cannot start: its good or bad set cannot be installed or run (exit 2)."""


@dataclass(frozen=True)
class Request:
    """What to bisect: the packages' moves, each package's versions in order (good first,
    bad last), and what counts as bad."""

    moves: tuple[Move, ...]
    walks: Mapping[str, tuple[str, ...]]
    criterion: Criterion = Criterion()
    command: tuple[str, ...] = ()


def bisect(
    request: Request,
    runner: Runner,
    *,
    stream: TextIO = sys.stderr,
    on_step: Callable[[BisectResult], object] | None = None,
) -> BisectResult:
    """Bisect; `on_step` gets the result so far after each step (an interrupted bisection
    keeps what it tried), and the answer is returned at the end."""
    return _Session(request, runner, stream, on_step).run()


class _Session:
    def __init__(
        self,
        request: Request,
        runner: Runner,
        stream: TextIO,
        on_step: Callable[[BisectResult], object] | None,
    ) -> None:
        self.request, self.runner, self.stream, self.on_step = request, runner, stream, on_step
        self.moves = request.moves
        self.started = time.perf_counter()
        self.tried: list[Tried] = []
        # (package, version) -> the attempts of the good set with that package at that version
        self.runs: dict[tuple[str, str], list[Attempt]] = {}
        self.found: dict[CellKey, Target] = {}
        self.blames: dict[CellKey, Blame] = {}
        self.searches: dict[CellKey, Search] = {}

    def run(self) -> BisectResult:
        good, bad = self._endpoints(tuple(self.runner.cells))
        timed = list(self.runner.cells) if self.request.criterion.wants(LATENCY) else []
        comparison = self.runner.compare(good, bad, timed=timed)
        found = targets(comparison.findings, good.by_cell(), bad.by_cell(), self.request.criterion)
        self.found = found
        self._note_endpoints(found)
        self._step()
        if not found:
            return self._result([], note=self._nothing_found())
        cells = "; ".join(f"{self._label(k)}: {t.message}" for k, t in found.items())
        self._say(f"{len(found)} cells to bisect: {cells}")
        self.blames = blames = self._culprits(found, good)
        walks = self.request.walks
        searches = {k: Search(b.package, walks[b.package]) for k, b in blames.items() if b.package}
        searches = self._search(searches, found, good)
        answers = [self._answer(k, t, blames[k], searches.get(k)) for k, t in found.items()]
        return self._result(answers)

    def _snapshot(self) -> BisectResult:
        """The result so far: what was tried, and each cell's search as it stands."""
        cells = []
        for key, target in self.found.items():
            b, search = self.blames.get(key), self.searches.get(key)
            outcome, verdicts = (search.outcome(), search.verdicts) if search else (None, ())
            blame_text = b.reason if b else "not blamed yet"
            package = search.package if search else None
            cells.append(
                CellAnswer(self._label(key), target, package, blame_text, outcome, verdicts)
            )
        return self._result(cells, note=f"in progress: {len(self.tried)} package sets tried so far")

    # -- the steps -------------------------------------------------------------------------

    def _endpoints(self, keys: tuple[CellKey, ...]) -> tuple[Run, Run]:
        """The good and the bad set, run together on every selected cell."""
        one = len(self.moves) == 1
        sides = {"good": good_set(self.moves), "bad": bad_set(self.moves)}
        sets = [
            PackageSet(reqs[0].replace("==", "-") if one else f"{side}-set", reqs, keys)
            for side, reqs in sides.items()
        ]
        attempts = self._batch(sets, ["good", "bad"])
        for side, attempt in zip(sides, attempts, strict=True):
            if attempt.run is None:
                reqs = " ".join(attempt.requirements)
                raise BisectError(f"the {side} set ({reqs}) cannot be used: {attempt.skipped}")
        for m in self.moves:
            self.runs.setdefault((m.package, m.good), []).append(attempts[0])
            if one:
                self.runs.setdefault((m.package, m.bad), []).append(attempts[1])
        good, bad = (a.run for a in attempts)
        assert good is not None and bad is not None
        return good, bad

    def _culprits(self, found: Mapping[CellKey, Target], good: Run) -> dict[CellKey, Blame]:
        """Several packages: each alone at its bad version on the good set, all at once."""
        if len(self.moves) == 1:
            return blame(self.moves, {}, found)
        tried = [(m.package, m.bad) for m in self.moves]
        verdicts = self._try(tried, {v: list(found) for v in tried}, found, good, "culprit")
        alone = {package: verdicts[(package, version)] for package, version in tried}
        blames = blame(self.moves, alone, found)
        for key, b in blames.items():
            self._say(f"{self._label(key)}: {b.reason}")
        self.blames = blames
        self._step()
        return blames

    def _search(
        self, searches: dict[CellKey, Search], found: Mapping[CellKey, Target], good: Run
    ) -> dict[CellKey, Search]:
        """Round by round, every version the searches ask for runs at once."""
        self.searches = searches
        while wanted := next_round(searches):
            verdicts = self._try(sorted(wanted), wanted, found, good, "bisect")
            for tried, keys in wanted.items():
                for key in keys:
                    searches[key] = searches[key].with_verdict(verdicts[tried][key])
            self._say(self._progress(searches))
            self._step()
        return searches

    def _try(
        self,
        tried: list[tuple[str, str]],
        keys: Mapping[tuple[str, str], list[CellKey]],
        found: Mapping[CellKey, Target],
        good: Run,
        purpose: str,
    ) -> dict[tuple[str, str], dict[CellKey, Verdict]]:
        """Run each (package, version) on the good set for its cells, and judge each cell
        against the good set."""
        sets = [
            PackageSet(f"{p}-{v}", with_version(self.moves, p, v), tuple(keys[(p, v)]))
            for p, v in tried
        ]
        attempts = self._batch(sets, [purpose] * len(sets))
        first = len(self.tried) - len(sets)
        verdicts: dict[tuple[str, str], dict[CellKey, Verdict]] = {}
        for i, ((package, version), attempt) in enumerate(zip(tried, attempts, strict=True)):
            if attempt.run is not None:
                self.runs.setdefault((package, version), []).append(attempt)
            judged = self._judge(version, attempt, keys[(package, version)], found, good)
            self.tried[first + i] = replace(
                self.tried[first + i], verdicts={self._label(k): v for k, v in judged.items()}
            )
            text = "; ".join(
                f"{self._label(k)}: {v.judgement} ({v.reason})" for k, v in judged.items()
            )
            self._say(f"    {attempt.label}: {text}")
            verdicts[(package, version)] = judged
        return verdicts

    def _judge(
        self,
        version: str,
        attempt: Attempt,
        keys: list[CellKey],
        found: Mapping[CellKey, Target],
        good: Run,
    ) -> dict[CellKey, Verdict]:
        if attempt.run is None:
            return {k: Verdict(version, Judgement.SKIP, attempt.skipped or "") for k in keys}
        timed = [k for k in keys if found[k].family == LATENCY]
        comparison = self.runner.compare(good, attempt.run, timed=timed)
        step = attempt.run.by_cell()
        judged = {}
        for k in keys:
            findings = [f for f in comparison.findings if f.cell is not None and f.cell.key == k]
            judged[k] = judge(found[k], version, findings, good.by_cell()[k], step.get(k))
        return judged

    def _batch(self, sets: list[PackageSet], purposes: list[str]) -> list[Attempt]:
        """Run the sets together; each is a line of the tried list."""
        for n, (s, purpose) in enumerate(zip(sets, purposes, strict=True), len(self.tried) + 1):
            reqs = " ".join(s.requirements)
            self._say(f"[{n}] {s.label} ({purpose}): {reqs}, {len(s.keys)} cells")
        attempts = self.runner.run_sets(sets)
        for attempt, purpose in zip(attempts, purposes, strict=True):
            if attempt.skipped:
                self._say(f"    {attempt.label} skipped: {attempt.skipped}")
            self.tried.append(
                Tried(
                    attempt.label,
                    attempt.requirements,
                    purpose,
                    attempt.run_dir,
                    attempt.skipped,
                    attempt.installs,
                    attempt.seconds,
                    variant=attempt.variant or None,
                )
            )
        return attempts

    # -- the answer ------------------------------------------------------------------------

    def _answer(self, key: CellKey, target: Target, b: Blame, search: Search | None) -> CellAnswer:
        label = self._label(key)
        if search is None:
            return CellAnswer(label, target, None, b.reason, also=b.also)
        outcome = search.outcome()
        evidence = Evidence()
        if outcome.first_bad is not None:
            evidence = self._evidence(
                key, target, search.package, outcome.last_good, outcome.first_bad
            )
        return CellAnswer(
            label, target, search.package, b.reason, outcome, search.verdicts, b.also, evidence
        )

    def _evidence(
        self, key: CellKey, target: Target, package: str, last_good: str, first_bad: str
    ) -> Evidence:
        before = self._holding(package, last_good, key)
        after = self._holding(package, first_bad, key)
        if before is None or before.run is None or after is None or after.run is None:
            return Evidence()
        b, a = before.run.by_cell()[key], after.run.by_cell()[key]
        paired = None
        if target.family == LATENCY:
            self._say(f"{self._label(key)}: timing {last_good} and {first_bad} together")
            timed = self.runner.time_together(before.run, after.run, [key])
            paired = _paired_dict(timed[key]) if key in timed else None
        return Evidence(_as_ran(b, before), _as_ran(a, after), op_count_diff(b, a), paired)

    def _holding(self, package: str, version: str, key: CellKey) -> Attempt | None:
        attempts = self.runs.get((package, version), [])
        return next((a for a in attempts if a.run is not None and key in a.run.by_cell()), None)

    # -- bookkeeping -----------------------------------------------------------------------

    def _note_endpoints(self, found: Mapping[CellKey, Target]) -> None:
        """The endpoints' verdicts in the tried list: the good set is the reference, the
        bad set bad for each target cell (by definition)."""
        for i, (judgement, reason) in enumerate(
            ((Judgement.GOOD, "the reference"), (Judgement.BAD, ""))
        ):
            entry = self.tried[i]
            verdicts = {
                self._label(k): Verdict(entry.label, judgement, reason or t.message)
                for k, t in found.items()
            }
            self.tried[i] = replace(entry, verdicts=verdicts)

    def _nothing_found(self) -> str:
        criterion = self.request.criterion.describe()
        return f"comparing the good and the bad set finds nothing to bisect on these cells (--finding {criterion})"

    def _progress(self, searches: Mapping[CellKey, Search]) -> str:
        parts = []
        for key, s in searches.items():
            lo, hi = s.bounds()
            left = sum(1 for v in s.versions[lo + 1 : hi] if s.verdict(v) is None)
            parts.append(
                f"{self._label(key)}: {s.versions[lo]} good .. {s.versions[hi]} bad, {left} untried between"
            )
        return "  " + "; ".join(parts)

    def _label(self, key: CellKey) -> str:
        return self.runner.cells[key].label()

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _step(self) -> None:
        if self.on_step is not None:
            self.on_step(self._snapshot())

    def _result(self, cells: list[CellAnswer], note: str | None = None) -> BisectResult:
        criterion = self.request.criterion.describe()
        wall_s = round(time.perf_counter() - self.started, 1)
        tried, command = tuple(self.tried), self.request.command
        return BisectResult(self.moves, criterion, tried, tuple(cells), command, wall_s, note)


def _paired_dict(r: PairResult) -> dict[str, object]:
    if r.error is not None:
        return {"error": r.error}
    return {
        "verdict": r.verdict,
        "ratio": round(math.exp(r.estimate), 4),
        "low": round(math.exp(r.low), 4),
        "high": round(math.exp(r.high), 4),
        "pairs": r.pairs,
        "p_value": r.p_value,
        "seconds": r.seconds,
    }


def _as_ran(record: Record, attempt: Attempt) -> dict[str, object]:
    """The record as its run directory holds it (its own variant), and where that is."""
    return {**json.loads(record.to_json()), "variant": attempt.variant, "run": attempt.run_dir}

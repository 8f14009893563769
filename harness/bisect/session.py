"""One bisection from start to answer, over a `SetRunner` (`harness.bisect.sets`):

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
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from harness.bisect.culprit import Blame, bad_set, blame, good_set, with_version
from harness.bisect.progress import (
    Phase,
    Progress,
    Wanted,
    answered,
    cells_so_far,
    endpoint_verdicts,
    nothing_found,
    search_progress,
    tried,
    wanted,
    with_blames,
    with_round,
    with_targets,
)
from harness.bisect.result import BisectResult, CellAnswer, Evidence, Tried
from harness.bisect.search import Judgement, Verdict
from harness.bisect.sets import Attempt, PackageSet, SetRunner
from harness.bisect.verdict import Criterion, Target, judge, op_count_diff, targets
from harness.bisect.versions import Move
from harness.store.diagnosis import failing_pass
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
    fix: bool = False  # the good versions are the newer ones: the search is for a fix


def bisect(
    request: Request,
    runner: SetRunner,
    *,
    stream: TextIO | None = None,
    on_step: Callable[[BisectResult], object] | None = None,
) -> BisectResult:
    """Bisect; `on_step` gets the result so far after each step (an interrupted bisection
    keeps what it tried), and the answer is returned at the end."""
    return _Session(request, runner, stream or sys.stderr, on_step).run()


class _Session:
    """One bisection's shell: runs the package sets the phase asks for, says what it
    does, and moves its `Progress` on (`harness.bisect.progress`). `tried` is the log of
    every set run, each line appended once its verdicts are known."""

    def __init__(
        self,
        request: Request,
        runner: SetRunner,
        stream: TextIO,
        on_step: Callable[[BisectResult], object] | None,
    ) -> None:
        self.request, self.runner, self.stream, self.on_step = request, runner, stream, on_step
        self.moves = request.moves
        self.started = time.perf_counter()
        self.tried: tuple[Tried, ...] = ()
        # (package, version) -> the attempts of the good set with that package at that version
        self.runs: dict[tuple[str, str], list[Attempt]] = {}
        self.progress = Progress()

    def run(self) -> BisectResult:
        good = self._endpoints(tuple(self.runner.cells))
        if self.progress.phase is Phase.NOTHING:
            criterion = self.request.criterion.describe()
            return self._result([], note=nothing_found(criterion))
        found = self.progress.found
        cells = "; ".join(f"{self._label(k)}: {t.message}" for k, t in found.items())
        self._say(f"{len(found)} cells to bisect: {cells}")
        self.progress = with_blames(self.progress, self._culprits(good), self.request.walks)
        if len(self.moves) > 1:
            self._step()  # the blames (a search shows from its first round)
        while asked := wanted(self.progress):
            in_order = dict(sorted(asked.items()))
            self.progress = with_round(self.progress, self._try(in_order, good, "bisect"))
            self._say(search_progress(self.progress, self._label))
            self._step()
        self.progress = answered(self.progress)
        answers = _Answers(self)
        return self._result([answers.of(k, t) for k, t in found.items()])

    # -- the steps -------------------------------------------------------------------------

    def _endpoints(self, keys: tuple[CellKey, ...]) -> Run:
        """The good and the bad set, run together on every selected cell and compared:
        the targets. Returns the good set's run."""
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
        timed = list(self.runner.cells) if self.request.criterion.wants(LATENCY) else []
        comparison = self.runner.compare(good, bad, timed=timed)
        found = targets(comparison.findings, good.by_cell(), bad.by_cell(), self.request.criterion)
        self.progress = with_targets(self.progress, found)
        verdicts = endpoint_verdicts((attempts[0], attempts[1]), found, self._label)
        self.tried += tuple(map(tried, attempts, ("good", "bad"), verdicts))
        self._step()
        return good

    def _culprits(self, good: Run) -> dict[CellKey, Blame]:
        """Several packages: each alone at its bad version on the good set, all at once."""
        found = self.progress.found
        if len(self.moves) == 1:
            return blame(self.moves, {}, found)
        asked = {(m.package, m.bad): list(found) for m in self.moves}
        verdicts = self._try(asked, good, "culprit")
        blames = blame(self.moves, {p: verdicts[(p, v)] for p, v in asked}, found)
        for key, b in blames.items():
            self._say(f"{self._label(key)}: {b.reason}")
        return blames

    def _try(
        self, asked: Wanted, good: Run, purpose: str
    ) -> dict[tuple[str, str], dict[CellKey, Verdict]]:
        """Run each (package, version) on the good set for its cells, in `asked`'s order,
        and judge each cell against the good set."""
        sets = [
            PackageSet(f"{p}-{v}", with_version(self.moves, p, v), tuple(keys))
            for (p, v), keys in asked.items()
        ]
        attempts = self._batch(sets, [purpose] * len(sets))
        verdicts: dict[tuple[str, str], dict[CellKey, Verdict]] = {}
        for (package, version), attempt in zip(asked, attempts, strict=True):
            if attempt.run is not None:
                self.runs.setdefault((package, version), []).append(attempt)
            judged = _judged(
                self.runner, self.progress.found, attempt, asked[(package, version)], good, version
            )
            labelled = {self._label(k): v for k, v in judged.items()}
            self.tried += (tried(attempt, purpose, labelled),)
            text = "; ".join(f"{k}: {v.judgement} ({v.reason})" for k, v in labelled.items())
            self._say(f"    {attempt.label}: {text}")
            verdicts[(package, version)] = judged
        return verdicts

    def _batch(self, sets: list[PackageSet], purposes: list[str]) -> list[Attempt]:
        """Run the sets together; each becomes a line of the tried log once judged."""
        for n, (s, purpose) in enumerate(zip(sets, purposes, strict=True), len(self.tried) + 1):
            reqs = " ".join(s.requirements)
            self._say(f"[{n}] {s.label} ({purpose}): {reqs}, {len(s.keys)} cells")
        attempts = self.runner.run_sets(sets)
        for attempt in attempts:
            if attempt.skipped:
                self._say(f"    {attempt.label} skipped: {attempt.skipped}")
        return attempts

    # -- bookkeeping -----------------------------------------------------------------------

    def _label(self, key: CellKey) -> str:
        return self.runner.cells[key].label()

    def _say(self, text: str) -> None:
        print(text, file=self.stream, flush=True)

    def _step(self) -> None:
        """The result so far, to `on_step`: what was tried, each cell as it stands."""
        if self.on_step is not None:
            note = f"in progress: {len(self.tried)} package sets tried so far"
            self.on_step(self._result(cells_so_far(self.progress, self._label), note=note))

    def _result(self, cells: list[CellAnswer], note: str | None = None) -> BisectResult:
        criterion = self.request.criterion.describe()
        wall_s = round(time.perf_counter() - self.started, 1)
        tried, command = self.tried, self.request.command
        return BisectResult(
            self.moves, criterion, tried, tuple(cells), command, wall_s, note, self.request.fix
        )


class _Answers:
    """Each cell's answer once every search is done, with its evidence at the boundary:
    the last good and first bad records as their run directories hold them, their op
    count diff, and for a latency finding the two graphs timed together."""

    def __init__(self, session: _Session) -> None:
        self.runner, self.runs, self.say = session.runner, session.runs, session._say
        self.label, self.progress = session._label, session.progress

    def of(self, key: CellKey, target: Target) -> CellAnswer:
        label, b = self.label(key), self.progress.blames[key]
        search = self.progress.searches.get(key)
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
            self.say(f"{self.label(key)}: timing {last_good} and {first_bad} together")
            timed = self.runner.time_together(before.run, after.run, [key])
            paired = _paired_dict(timed[key]) if key in timed else None
        where = failing_pass(a, Path(after.run.path) if after.run.path else None)
        return Evidence(_as_ran(b, before), _as_ran(a, after), op_count_diff(b, a), paired, where)

    def _holding(self, package: str, version: str, key: CellKey) -> Attempt | None:
        attempts = self.runs.get((package, version), [])
        return next((a for a in attempts if a.run is not None and key in a.run.by_cell()), None)


def _judged(
    runner: SetRunner,
    found: Mapping[CellKey, Target],
    attempt: Attempt,
    keys: list[CellKey],
    good: Run,
    version: str,
) -> dict[CellKey, Verdict]:
    """Each cell's verdict of a package set: compared with the good set (skipped where the
    set could not run)."""
    if attempt.run is None:
        return {k: Verdict(version, Judgement.SKIP, attempt.skipped or "") for k in keys}
    timed = [k for k in keys if found[k].family == LATENCY]
    comparison = runner.compare(good, attempt.run, timed=timed)
    step = attempt.run.by_cell()
    judged = {}
    for k in keys:
        findings = [f for f in comparison.findings if f.cell is not None and f.cell.key == k]
        judged[k] = judge(found[k], version, findings, good.by_cell()[k], step.get(k))
    return judged


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

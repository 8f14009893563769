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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TextIO

from harness.bisect.culprit import Blame, bad_set, blame, good_set, with_version
from harness.bisect.result import BisectResult, CellAnswer, Evidence, Tried
from harness.bisect.runner import Attempt, Runner, variant_label
from harness.bisect.search import Judgement, Search, Verdict, next_round
from harness.bisect.verdict import Criterion, Target, judge, op_count_diff, targets
from harness.bisect.versions import Move
from harness.compare import Comparison
from harness.store.paired import PairResult
from harness.store.records import Record
from harness.store.runs import CellKey, Run

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


def bisect(request: Request, runner: Runner, *, stream: TextIO = sys.stderr) -> BisectResult:
    started = time.perf_counter()
    result = _Session(request, runner, stream).run()
    return replace(result, wall_s=round(time.perf_counter() - started, 1))


class _Session:
    def __init__(self, request: Request, runner: Runner, stream: TextIO) -> None:
        self.request, self.runner, self.stream = request, runner, stream
        self.moves = request.moves
        self.tried: list[Tried] = []
        # (package, version) -> the attempts of the good set with that package at that version
        self.runs: dict[tuple[str, str], list[Attempt]] = {}

    def run(self) -> BisectResult:
        keys = list(self.runner.cells)
        good = self._endpoint("good", good_set(self.moves), keys)
        bad = self._endpoint("bad", bad_set(self.moves), keys)
        timed = keys if self.request.criterion.wants(LATENCY) else []
        comparison = self.runner.compare(good, bad, timed=timed)
        found = targets(comparison.findings, good.by_cell(), bad.by_cell(), self.request.criterion)
        self._note_endpoints(found)
        if not found:
            return self._result([], note=self._nothing_found())
        self._say(
            f"{len(found)} cells to bisect: "
            + "; ".join(f"{self._label(k)}: {t.message}" for k, t in found.items())
        )
        blames = self._culprits(found, good)
        searches = self._search(
            {
                k: Search(b.package, self.request.walks[b.package])
                for k, b in blames.items()
                if b.package
            },
            found,
            good,
        )
        cells = [self._answer(k, t, blames[k], searches.get(k), good) for k, t in found.items()]
        return self._result(cells)

    # -- the steps -------------------------------------------------------------------------

    def _endpoint(self, side: str, requirements: tuple[str, ...], keys: list[CellKey]) -> Run:
        label = f"{side}-set" if len(self.moves) > 1 else requirements[0].replace("==", "-")
        attempt = self._attempt(label, requirements, keys, purpose=side)
        if attempt.run is None:
            raise BisectError(
                f"the {side} set ({' '.join(requirements)}) cannot be used: {attempt.skipped}"
            )
        for m in self.moves:
            version = m.good if side == "good" else m.bad
            if side == "good" or len(self.moves) == 1:
                self.runs.setdefault((m.package, version), []).append(attempt)
        return attempt.run

    def _culprits(self, found: Mapping[CellKey, Target], good: Run) -> dict[CellKey, Blame]:
        if len(self.moves) == 1:
            return blame(self.moves, {}, found)
        alone: dict[str, dict[CellKey, Verdict]] = {}
        for m in self.moves:
            requirements = with_version(self.moves, m.package, m.bad)
            alone[m.package] = self._try(
                m.package, m.bad, requirements, list(found), found, good, "culprit"
            )
        blames = blame(self.moves, alone, found)
        for key, b in blames.items():
            self._say(f"{self._label(key)}: {b.reason}")
        return blames

    def _search(
        self, searches: dict[CellKey, Search], found: Mapping[CellKey, Target], good: Run
    ) -> dict[CellKey, Search]:
        while wanted := next_round(searches):
            for (package, version), keys in sorted(wanted.items()):
                requirements = with_version(self.moves, package, version)
                verdicts = self._try(package, version, requirements, keys, found, good, "bisect")
                for key in keys:
                    searches[key] = searches[key].with_verdict(verdicts[key])
            self._say(self._progress(searches))
        return searches

    def _try(
        self,
        package: str,
        version: str,
        requirements: tuple[str, ...],
        keys: list[CellKey],
        found: Mapping[CellKey, Target],
        good: Run,
        purpose: str,
    ) -> dict[CellKey, Verdict]:
        """Run one set for `keys` and judge each cell against the good set."""
        label = f"{package}-{version}"
        attempt = self._attempt(label, requirements, keys, purpose=purpose, record=False)
        if attempt.run is None:
            verdicts = {k: Verdict(version, Judgement.SKIP, attempt.skipped or "") for k in keys}
        else:
            self.runs.setdefault((package, version), []).append(attempt)
            timed = [k for k in keys if found[k].family == LATENCY]
            comparison = self.runner.compare(good, attempt.run, timed=timed)
            verdicts = {
                k: self._judge(k, found[k], version, comparison, good, attempt.run) for k in keys
            }
        self._record(attempt, purpose, {self._label(k): v for k, v in verdicts.items()})
        self._say(
            "    "
            + "; ".join(
                f"{self._label(k)}: {v.judgement} ({v.reason})" for k, v in verdicts.items()
            )
        )
        return verdicts

    def _judge(
        self,
        key: CellKey,
        target: Target,
        version: str,
        comparison: Comparison,
        good: Run,
        step: Run,
    ) -> Verdict:
        findings = [f for f in comparison.findings if f.cell is not None and f.cell.key == key]
        return judge(target, version, findings, good.by_cell()[key], step.by_cell().get(key))

    def _attempt(
        self,
        label: str,
        requirements: tuple[str, ...],
        keys: Iterable[CellKey],
        *,
        purpose: str,
        record: bool = True,
    ) -> Attempt:
        keys = list(keys)
        self._say(
            f"[{len(self.tried) + 1}] {label} ({purpose}): {' '.join(requirements)}, {len(keys)} cells"
        )
        attempt = self.runner.attempt(label, requirements, keys)
        if attempt.skipped:
            self._say(f"    skipped: {attempt.skipped}")
        if record:
            self._record(attempt, purpose, {})
        return attempt

    # -- the answer ------------------------------------------------------------------------

    def _answer(
        self, key: CellKey, target: Target, b: Blame, search: Search | None, good: Run
    ) -> CellAnswer:
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

    def _record(self, attempt: Attempt, purpose: str, verdicts: dict[str, Verdict]) -> None:
        self.tried.append(
            Tried(
                attempt.label,
                attempt.requirements,
                purpose,
                attempt.run_dir,
                attempt.skipped,
                attempt.installs,
                round(attempt.seconds, 1),
                verdicts,
            )
        )

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

    def _result(self, cells: list[CellAnswer], note: str | None = None) -> BisectResult:
        criterion = self.request.criterion.describe()
        return BisectResult(
            self.moves, criterion, tuple(self.tried), tuple(cells), self.request.command, note=note
        )


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
    return {
        **json.loads(record.to_json()),
        "variant": variant_label(attempt.label),
        "run": attempt.run_dir,
    }

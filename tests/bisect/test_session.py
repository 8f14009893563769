"""The steps of a bisection (harness.bisect.session) over a stand-in runner that answers
each package set with hand-made records instead of running it in a Ray runtime_env: the
steps' decisions (which sets run together, what is blamed, what is reported) without the
minutes each real set costs. tests/ray/test_bisect.py and
tests/e2e/test_bisect_env.py run the real thing."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence

import pytest

from harness.bisect.result import BisectResult
from harness.bisect.search import Judgement
from harness.bisect.session import BisectError, Request, bisect
from harness.bisect.sets import Attempt, PackageSet
from harness.bisect.verdict import Criterion
from harness.bisect.versions import Move
from harness.compare import Comparison, Options, compare_runs
from harness.store.paired import PairResult
from harness.store.records import Record
from harness.store.runs import CellKey, Run
from tests.fixtures_compare import record, run

FAILED = dict(status="export_failed", stage="translate", error=RuntimeError("no aten.histc"))
Oracle = Callable[[dict[str, str], str], Record | None]  # versions, model -> record (None: skip)


class StandIn:
    """Answers `run_sets` from an oracle over the versions each set asks for."""

    def __init__(self, models: Sequence[str], oracle: Oracle) -> None:
        self.cells = {record(m).cell.key: record(m).cell for m in models}
        self.oracle = oracle
        self.batches: list[list[str]] = []

    def run_sets(self, sets: Sequence[PackageSet]) -> list[Attempt]:
        self.batches.append([s.label for s in sets])
        attempts = []
        for s in sets:
            versions = dict(r.split("==") for r in s.requirements)
            records = [self.oracle(versions, self.cells[k].model) for k in s.keys]
            if any(r is None for r in records):
                attempts.append(Attempt(s.label, s.requirements, skipped="does not import"))
                continue
            ran = run(s.variant, [r for r in records if r is not None])
            attempts.append(
                Attempt(s.label, s.requirements, ran, f"runs/{s.variant}", variant=s.variant)
            )
        return attempts

    def compare(self, good: Run, step: Run, *, timed: Iterable[CellKey] = ()) -> Comparison:
        return compare_runs(good, step, Options())

    def time_together(
        self, before: Run, after: Run, keys: Iterable[CellKey]
    ) -> dict[CellKey, PairResult]:
        return {}


def breaks_at(package: str, first_bad: str, *, skip: str | None = None) -> Oracle:
    def oracle(versions: dict[str, str], model: str) -> Record | None:
        v = versions.get(package)
        if v == skip:
            return None
        return (
            record(model, **FAILED)
            if v is not None and float(v) >= float(first_bad)
            else record(model)
        )

    return oracle


def run_bisect(
    runner: StandIn,
    *moves: Move,
    versions: dict[str, tuple[str, ...]],
    steps: list[BisectResult] | None = None,
) -> BisectResult:
    request = Request(tuple(moves), versions, Criterion())
    on_step = steps.append if steps is not None else None
    return bisect(request, runner, stream=io.StringIO(), on_step=on_step)  # type: ignore[arg-type]


CORE = Move("core", "1.0", "1.7")
CORE_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "1.6", "1.7")


def test_one_package_good_and_bad_run_together_then_one_version_per_round() -> None:
    runner = StandIn(["widen"], breaks_at("core", "1.5", skip="1.3"))
    result = run_bisect(runner, CORE, versions={"core": CORE_VERSIONS})
    (cell,) = result.cells
    assert (cell.package, cell.outcome.first_bad, cell.outcome.last_good) == ("core", "1.5", "1.4")
    assert runner.batches == [["core-1.0", "core-1.7"], ["core-1.3"], ["core-1.4"], ["core-1.5"]]
    assert [t.purpose for t in result.tried] == ["good", "bad", "bisect", "bisect", "bisect"]
    assert result.tried[2].skipped == "does not import"
    assert [v.judgement for v in cell.verdicts] == [Judgement.SKIP, Judgement.GOOD, Judgement.BAD]
    assert cell.evidence.first_bad["status"] == "export_failed"
    assert cell.evidence.first_bad["run"] == "runs/core-1.5"


def test_nothing_between_good_and_bad_is_a_result_that_says_so() -> None:
    runner = StandIn(["widen"], lambda versions, model: record(model))
    result = run_bisect(runner, CORE, versions={"core": CORE_VERSIONS})
    assert result.cells == () and not result.answered
    assert result.note == (
        "comparing the good and the bad set finds nothing to bisect on these cells (--finding auto)"
    )
    assert runner.batches == [["core-1.0", "core-1.7"]]


def test_a_good_set_that_cannot_be_used_stops_the_bisection() -> None:
    runner = StandIn(["widen"], breaks_at("core", "1.5", skip="1.0"))
    with pytest.raises(
        BisectError, match=r"the good set \(core==1.0\) cannot be used: does not import"
    ):
        run_bisect(runner, CORE, versions={"core": CORE_VERSIONS})


def test_several_packages_blame_the_one_whose_move_alone_does_it_and_bisect_it_on_the_good_set() -> (
    None
):
    extra = Move("extra", "1.0", "1.1")
    runner = StandIn(["widen", "chain"], breaks_at("core", "1.5"))
    result = run_bisect(
        runner, CORE, extra, versions={"core": CORE_VERSIONS, "extra": ("1.0", "1.1")}
    )
    assert runner.batches[:2] == [["good-set", "bad-set"], ["core-1.7", "extra-1.1"]]
    assert {c.package for c in result.cells} == {"core"}
    assert {c.outcome.first_bad for c in result.cells} == {"1.5"}
    core_sets = [t.requirements for t in result.tried if t.purpose == "bisect"]
    assert core_sets and all("extra==1.0" in reqs for reqs in core_sets)  # extra at its good
    assert result.package == "core" and result.answered


def test_a_finding_no_single_move_causes_is_not_bisected() -> None:
    def together(versions: dict[str, str], model: str) -> Record:
        both = versions["core"] == "1.7" and versions["extra"] == "1.1"
        return record(model, **FAILED) if both else record(model)

    extra = Move("extra", "1.0", "1.1")
    runner = StandIn(["widen"], together)
    result = run_bisect(
        runner, CORE, extra, versions={"core": CORE_VERSIONS, "extra": ("1.0", "1.1")}
    )
    (cell,) = result.cells
    assert cell.package is None and cell.outcome is None
    assert cell.blame.startswith("no package alone at its bad version reproduces it")
    assert len(runner.batches) == 2 and not result.answered


def test_each_step_hands_over_the_result_so_far_and_none_claims_an_answer_early() -> None:
    steps: list[BisectResult] = []
    runner = StandIn(["widen"], breaks_at("core", "1.5", skip="1.3"))
    final = run_bisect(runner, CORE, versions={"core": CORE_VERSIONS}, steps=steps)
    assert [len(s.tried) for s in steps] == [2, 3, 4, 5]  # endpoints, then each round
    assert all(s.note and s.note.startswith("in progress") for s in steps)
    assert not any(s.answered for s in steps[:-1])  # a search not done answers nothing
    assert steps[-1].answered and steps[-1].cells[0].outcome.first_bad == "1.5"
    assert final.note is None and final.answered
    # The tried log only grows: each line is final when a step first shows it.
    assert all(final.tried[: len(s.tried)] == s.tried for s in steps)
    assert final.cells[0].evidence.first_bad is not None  # the evidence comes at the end

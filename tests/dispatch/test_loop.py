"""The driver's loop (harness/dispatch/loop.py) driven by a stand-in for Ray: `FakeRay` is
the only fake here. It plays Ray's side of `loop.Tasks` (nodes, submit, wait, result,
cancel, the start board) on a clock of its own, so seconds of settling and a backstop of
minutes pass at once; the loop and every decision it takes (`harness.dispatch.policy`) are
the real ones. `tests/e2e/test_distribution.py` runs the same loop on a real Ray cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.dispatch.flight import Start
from harness.dispatch.loop import Driver
from harness.dispatch.policy import (
    BOARD_MISSES_MAX,
    ISOLATION_GRACE_S,
    POLL_S,
    Evidence,
    Failure,
    Options,
    TaskFailure,
)
from harness.runtime.limits import crash_log_path
from harness.store.records import Cell, CellTask, Measurements, Record
from harness.store.status import Status

NEVER = float("inf")


@dataclass
class Plan:
    """What a model's task does in the fake: runs `seconds`, then returns its record or
    `fails` (once per attempt listed, by attempt number); `kills_node` marks its node dead
    as it fails; `crash_log` leaves a faulthandler log as a segfaulting cell would."""

    seconds: float = 1.0
    fails: Mapping[int, TaskFailure] = field(default_factory=dict)
    kills_node: bool = False
    crash_log: bool = False


@dataclass
class _Task:
    task: CellTask
    node: str
    finishes: float


class FakeRay:
    """Ray's side of `loop.Tasks`, by hand: every submitted task starts at once on the
    alive node with the fewest tasks, reports its start to the board (unless the board is
    down), and finishes after its plan's seconds."""

    def __init__(self, nodes: Mapping[str, Mapping[str, float]], plans: Mapping[str, Plan]) -> None:
        self.alive = dict.fromkeys(nodes, True)
        self.resources = nodes
        self.plans = plans
        self.clock = 0.0
        self.tasks: dict[int, _Task] = {}
        self.starts: list[Start] = []
        self.board_answers = True
        self.drains = 0
        self.submitted: list[tuple[str, int, bool]] = []  # model, attempt, report_start
        self.cancelled: list[str] = []

    def now(self) -> float:
        return self.clock

    def sleep(self, seconds: float) -> None:
        self.clock += seconds

    def nodes(self) -> list[Mapping[str, Any]]:
        return [
            {"NodeID": n, "Alive": self.alive[n], "Resources": dict(r)}
            for n, r in self.resources.items()
        ]

    def submit(self, task: CellTask, flight_id: int, *, report_start: bool) -> int:
        node = min((n for n in self.alive if self.alive[n]), key=self._load)
        plan = self.plans[task.cell.model]
        self.tasks[flight_id] = _Task(task, node, self.clock + plan.seconds)
        self.submitted.append((task.cell.model, task.attempt, report_start))
        if report_start:
            self.starts.append((flight_id, node, f"host-{node}", 1000 + flight_id, 0.0))
        return flight_id

    def _load(self, node: str) -> int:
        return sum(1 for t in self.tasks.values() if t.node == node)

    def wait(self, refs: Sequence[int], timeout_s: float) -> list[int]:
        first = min(self.tasks[r].finishes for r in refs)
        self.clock = min(max(first, self.clock), self.clock + timeout_s)
        return [r for r in refs if self.tasks[r].finishes <= self.clock]

    def result(self, ref: int) -> Record | TaskFailure:
        ran = self.tasks.pop(ref)
        task, plan = ran.task, self.plans[ran.task.cell.model]
        failed = plan.fails.get(task.attempt)
        if failed is None:
            ok = Record.finished(task.cell, task.run_id, Measurements())
            return ok.with_changes(attempt=task.attempt)
        if plan.kills_node:
            self.alive[ran.node] = False
        if plan.crash_log:
            log = crash_log_path(task.run_dir, task.cell.cell_id)
            log.parent.mkdir(parents=True, exist_ok=True)
            log.write_text('Fatal Python error: Segmentation fault\n\n  File "m.py", line 3 in f\n')
        return failed

    def cancel(self, ref: int) -> None:
        self.cancelled.append(self.tasks.pop(ref).task.cell.model)

    def drain_starts(self) -> list[Start] | None:
        self.drains += 1
        if not self.board_answers:
            return None
        starts, self.starts = self.starts, []
        return starts


def _tasks(run_dir: Path, *models: str, device: str = "cpu") -> list[CellTask]:
    return [
        CellTask(Cell(m, "torchscript", 17, device=device), "zoo.py", "r", str(run_dir))
        for m in models
    ]


def _run(ray: FakeRay, tasks: list[CellTask], **options: Any) -> tuple[list[Record], Driver[int]]:
    records: list[Record] = []
    driver = Driver(tasks, records.append, Options(**{"timeout_s": 60.0, **options}), ray)
    driver.run()
    return records, driver


TWO_CPUS = {"a": {"CPU": 2.0}}
DIED = TaskFailure(Failure.DIED, "The worker died unexpectedly", Evidence.WORKER)


def test_cells_go_in_as_slots_free_and_come_back_in_completion_order(tmp_path: Path) -> None:
    plans = {"slow": Plan(5.0), "quick": Plan(1.0), "third": Plan(1.0)}
    ray = FakeRay(TWO_CPUS, plans)
    records, driver = _run(ray, _tasks(tmp_path, "slow", "quick", "third"))
    assert [r.model for r in records] == ["quick", "third", "slow"]
    assert [r.status for r in records] == [Status.OK] * 3
    stats = driver.stats
    assert (stats.submitted, stats.completed, stats.peak_in_flight) == (3, 3, 2)
    assert ray.clock == pytest.approx(5.0)  # third ran beside slow, in quick's slot


def test_a_crash_with_last_words_on_a_live_node_is_the_cells_own_at_once(tmp_path: Path) -> None:
    ray = FakeRay(
        {"a": {"CPU": 1.0}, "b": {"CPU": 1.0}},
        {"segv": Plan(fails={1: DIED}, crash_log=True), "fine": Plan()},
    )
    records, driver = _run(ray, _tasks(tmp_path, "segv", "fine"))
    crash = next(r for r in records if r.model == "segv")
    assert crash.status is Status.CRASHED
    assert crash.error_message == (
        "worker process died while running the cell: SIGSEGV (Segmentation fault); "
        'last Python frame: File "m.py", line 3 in f'
    )
    assert crash.worker is not None and crash.worker.node == "a"  # from its start report
    assert driver.stats.retried == 0 and driver.stats.crashes == 1
    assert [m for m, _, _ in ray.submitted] == ["segv", "fine"]


def test_a_task_whose_node_died_runs_again_elsewhere(tmp_path: Path) -> None:
    ray = FakeRay(
        {"a": {"CPU": 1.0}, "b": {"CPU": 1.0}},
        {"unlucky": Plan(2.0, fails={1: DIED}, kills_node=True), "fine": Plan(10.0)},
    )
    records, driver = _run(ray, _tasks(tmp_path, "unlucky", "fine"), settle_s=30.0)
    unlucky = next(r for r in records if r.model == "unlucky")
    assert (unlucky.status, unlucky.attempt) == (Status.OK, 2)
    assert ray.submitted == [("unlucky", 1, True), ("fine", 1, True), ("unlucky", 2, True)]
    stats = driver.stats
    assert (stats.retried, stats.lost_nodes, stats.crashes) == (1, {"a"}, 0)
    assert stats.completed == 3  # the lost task, and both records


def test_a_dead_worker_whose_node_stays_alive_is_a_crash_once_the_node_settles(
    tmp_path: Path,
) -> None:
    ray = FakeRay({"a": {"CPU": 1.0}, "b": {"CPU": 1.0}}, {"dies": Plan(1.0, fails={1: DIED})})
    records, driver = _run(ray, _tasks(tmp_path, "dies"), settle_s=30.0)
    (record,) = records
    assert record.status is Status.CRASHED
    assert record.error_message == (
        "worker process died while running the cell: The worker died unexpectedly"
    )
    assert driver.stats.settle_waits_s[0] == pytest.approx(30.0, abs=0.5)  # waited, then own
    assert driver.stats.retried == 0


def test_a_board_that_stops_answering_is_dropped_and_cells_are_timed_from_submission(
    tmp_path: Path,
) -> None:
    plans = {f"m{i}": Plan(2.0) for i in range(6)}
    ray = FakeRay({"a": {"CPU": 1.0}}, plans)
    ray.board_answers = False
    records, driver = _run(ray, _tasks(tmp_path, *plans))
    assert [r.status for r in records] == [Status.OK] * 6
    assert ray.drains == BOARD_MISSES_MAX  # then never asked again
    reports = [report for _, _, report in ray.submitted]
    assert reports[0] is True and reports[-1] is False
    assert not driver.board.up and driver.stats.completed == 6


def test_a_task_past_its_backstop_is_cancelled_and_recorded_timeout(tmp_path: Path) -> None:
    ray = FakeRay(TWO_CPUS, {"hangs": Plan(NEVER), "fine": Plan(1.0)})
    records, driver = _run(ray, _tasks(tmp_path, "hangs", "fine"), timeout_s=10.0)
    hung = next(r for r in records if r.model == "hangs")
    assert hung.status is Status.TIMEOUT
    assert hung.error_message == f"no result after {2 * 10 + ISOLATION_GRACE_S:g} s; worker killed"
    assert ray.cancelled == ["hangs"]
    # Its clock started when its start report was drained (the first poll, 0.5 s); it is
    # past the backstop at the first poll after that plus twice the timeout and the grace.
    assert ray.clock == pytest.approx(POLL_S + 2 * 10.0 + ISOLATION_GRACE_S + POLL_S)
    assert (driver.stats.timeouts, driver.stats.completed) == (1, 2)


def test_cells_no_alive_node_can_run_are_not_attempted_after_settling(tmp_path: Path) -> None:
    ray = FakeRay(TWO_CPUS, {"gpu": Plan(), "cpu": Plan()})
    tasks = [*_tasks(tmp_path, "gpu", device="cuda"), *_tasks(tmp_path, "cpu")]
    records, driver = _run(ray, tasks, settle_s=20.0)
    by_model = {r.model: r for r in records}
    assert by_model["cpu"].status is Status.OK
    assert by_model["gpu"].status is Status.NOT_ATTEMPTED
    assert by_model["gpu"].error_message == (
        "no alive node of the Ray cluster can run it (it needs 1 CPUs and 1 GPU)"
    )
    assert [m for m, _, _ in ray.submitted] == ["cpu"]  # the CUDA cell was held, never sent
    assert ray.clock >= 20.0
    assert (driver.stats.not_attempted, driver.stats.completed) == (1, 1)

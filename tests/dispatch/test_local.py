"""The local runner (`harness run --local`): the driver's loop over `LocalTasks`, real cells
in real zygotes on this machine, no Ray. Nothing is mocked."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.dispatch import local
from harness.dispatch.loop import Driver
from harness.dispatch.policy import Options, RayNode
from harness.plan.memory import pair_need_gb
from harness.runtime import kept
from harness.runtime.zygote import Work
from harness.store.paired import PairResult, PairTask
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow

QUICK = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02, max_time_s=0.2)
FAULTS = FIXTURES / "faults" / "faults.py"
SLOW = FIXTURES / "slow" / "slow.py"  # paced_*: 2-s builds, two cells at once overlap
TINY = FIXTURES / "tiny" / "models.py"


def _task(run_dir: Path, source: Path, model: str, **kw: object) -> CellTask:
    cell = Cell(model, "torchscript", 18)
    fields: dict[str, object] = {"protocol": QUICK, "timeout_s": 120, **kw}
    return CellTask(cell, str(source), "local-test", str(run_dir), **fields)  # type: ignore[arg-type]


def _run(tasks: list[CellTask], **options: object) -> tuple[list[Record], object]:
    records: list[Record] = []
    opts = Options(**{"timeout_s": 120, **options})  # type: ignore[arg-type]
    runner = local.runner()
    stats = runner.run_tasks(tasks, records.append, opts)
    return records, stats


def test_cells_run_in_their_own_processes_and_failures_are_records(tmp_path: Path) -> None:
    tasks = [
        _task(tmp_path, TINY, "tiny_mlp"),
        _task(tmp_path, FAULTS, "fault_segv"),
        _task(tmp_path, FAULTS, "fault_hang", timeout_s=3),
        _task(tmp_path, TINY, "tiny_conv"),
    ]
    records, _ = _run(tasks)
    by_model = {r.model: r for r in records}
    assert len(records) == 4
    assert by_model["tiny_mlp"].status == Status.OK
    assert by_model["tiny_conv"].status == Status.OK
    assert by_model["fault_segv"].status == Status.CRASHED
    assert "SIGSEGV" in (by_model["fault_segv"].reason or "")
    assert by_model["fault_hang"].status == Status.TIMEOUT
    pids = {r.worker.cell_pid for r in records if r.worker is not None}
    assert len(pids) == 4  # a process per cell
    assert all(r.worker is not None and r.worker.node == local.NODE for r in records)


@pytest.fixture
def not_keeping(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runner as a user's process has it: the tests' processes keep zygotes, and run a
    local run's cells one at a time (harness/runtime/kept.py)."""
    monkeypatch.setenv(kept.KEEP_ENV, "0")


def _drive(tasks: list[CellTask], node: RayNode) -> list[Record]:
    records: list[Record] = []
    tasks_here = local.LocalTasks(node)
    try:
        Driver(tasks, records.append, Options(timeout_s=120), tasks_here).run()
    finally:
        tasks_here.close()
    return records


def _spans(records: list[Record]) -> list[tuple[float, float]]:
    spans = sorted((r.worker.started_at, r.worker.finished_at) for r in records if r.worker)
    assert len(spans) == len(records) and all(a is not None and b is not None for a, b in spans)
    return spans  # type: ignore[return-value]


def _two_cores() -> RayNode:
    node = local.this_node()
    node["Resources"] = {**node["Resources"], "CPU": 2.0}
    return node


def test_cells_run_at_once_on_a_users_runner_and_one_at_a_time_where_zygotes_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two one-thread cells on two cores: at once, each from a zygote of its own slot, as a
    user's run has them; where the process runs its cells one at a time (KEEP_ENV), one
    after the other from one zygote, kept (warm-up skipped) or the run's own (warm-up on)."""
    tasks = [_task(tmp_path, SLOW, f"paced_{i}") for i in range(2)]
    monkeypatch.setenv(kept.KEEP_ENV, "0")
    apart = _drive(tasks, _two_cores())
    (_, first_end), (second, _) = _spans(apart)
    assert second < first_end
    assert len({r.worker.zygote_pid for r in apart if r.worker}) == 2
    monkeypatch.setenv(kept.KEEP_ENV, "1")
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "1")
    monkeypatch.setenv("HARNESS_TEST_KEPT_ZYGOTES", "one-at-a-time")  # a key of its own
    together = _drive(tasks, _two_cores())
    (_, first_end), (second, _) = _spans(together)
    assert second >= first_end
    assert len({r.worker.zygote_pid for r in together if r.worker}) == 1
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "0")  # nothing kept: the run's own zygote
    warmed = _drive(tasks, _two_cores())
    (_, first_end), (second, _) = _spans(warmed)
    assert second >= first_end
    assert len(zygotes := {r.worker.zygote_pid for r in warmed if r.worker}) == 1
    assert zygotes.isdisjoint(r.worker.zygote_pid for r in together if r.worker)


def test_a_cell_of_the_machines_cores_runs_alone(tmp_path: Path, not_keeping: None) -> None:
    """--threads as many as the machine has: the paced cells run one after another, never
    two at once (each starts after the one before it finished)."""
    cores = int(local.this_node()["Resources"]["CPU"])
    tasks = [_task(tmp_path, SLOW, f"paced_{i}", threads=cores) for i in range(2)]
    records, stats = _run(tasks, threads=cores)
    spans = sorted(
        (r.worker.started_at, r.worker.finished_at) for r in records if r.worker is not None
    )
    assert len(spans) == 2 and all(s[0] is not None and s[1] is not None for s in spans)
    assert spans[1][0] >= spans[0][1]  # type: ignore[operator]
    assert stats.peak_in_flight == 1  # type: ignore[attr-defined]


def test_the_backstop_kills_a_running_cell_and_the_run_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cell whose zygote does not enforce its timeout (none given to the task) is killed
    by the driver's backstop; the next cell runs in fresh zygotes."""
    from harness.dispatch import policy

    monkeypatch.setattr(policy, "ISOLATION_GRACE_S", 0.0)  # the backstop at twice the timeout
    hang = _task(tmp_path, FAULTS, "fault_hang", timeout_s=None)
    started = time.perf_counter()
    records, _ = _run([hang, _task(tmp_path, TINY, "tiny_mlp")], timeout_s=10, max_in_flight=1)
    by_model = {r.model: r for r in records}
    assert by_model["fault_hang"].status == Status.TIMEOUT
    assert "worker killed" in (by_model["fault_hang"].reason or "")
    assert by_model["tiny_mlp"].status == Status.OK
    assert by_model["tiny_mlp"].worker is not None and hang_ended(by_model["fault_hang"]) < (
        by_model["tiny_mlp"].worker.started_at or 0
    )
    assert time.perf_counter() - started < 180


def hang_ended(record: Record) -> float:
    assert record.worker is not None and record.worker.collected_at is not None
    return record.worker.collected_at


def test_cells_that_together_need_more_memory_than_the_machine_run_one_at_a_time(
    tmp_path: Path, not_keeping: None
) -> None:
    """Each cell reserves its memory need on the local runner as on a Ray node: two paced
    cells of 6 GB each on a machine offering 10 GB run one after the other, though two CPU
    slots are free (the node is this machine with its memory said to be 10 GB)."""
    node = _two_cores()
    node["Resources"]["memory"] = 10.0 * 1024**3
    tasks = [_task(tmp_path, SLOW, f"paced_{i}", memory_gb=6.0) for i in range(2)]
    records = _drive(tasks, node)
    assert [r.status for r in records] == [Status.OK, Status.OK]
    (_, first_end), (second, _) = _spans(records)
    assert second >= first_end


def test_a_runs_zygotes_are_kept_for_the_next_run_under_the_same_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the warm-up skipped and KEEP_ENV set (as tests/conftest.py sets both), a second
    run takes the first's zygote: its cell forks from the same process, which has paid its
    cold start, and prints to the second run's log; another environment, or the warm-up on,
    gets a zygote of its own."""
    monkeypatch.setenv(kept.KEEP_ENV, "1")
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "1")
    monkeypatch.setenv("HARNESS_TEST_KEPT_ZYGOTES", "first")  # a key no other test shares

    def zygote_of(run_id: str) -> tuple[int | None, bool]:
        (record,) = _run([replace(_task(tmp_path, TINY, "tiny_mlp"), run_id=run_id)])[0]
        assert record.status == Status.OK and record.worker is not None, record.reason
        return record.worker.zygote_pid, record.worker.cold_start is not None

    first, second = zygote_of("kept-1"), zygote_of("kept-2")
    # the cold start rode on the first run's record only
    assert first[1] and not second[1], (first, second)
    assert first[0] is not None and second[0] == first[0]
    assert (local.logs_of("kept-2") / "zygote-1.log").is_file()
    monkeypatch.setenv("HARNESS_TEST_KEPT_ZYGOTES", "second")
    other_environment = zygote_of("kept-3")
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "0")
    warmed_up = zygote_of("kept-4")
    assert len({first[0], other_environment[0], warmed_up[0]}) == 3
    assert other_environment[1] and warmed_up[1]


def zygote_of_this_work(_: None) -> int:
    return os.getppid()


def test_work_on_a_runs_cells_takes_the_zygote_the_run_kept_and_keeps_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Repro's minimizer and debt's search (`ZygotePool`) fork from the zygote a local run
    kept, and keep it for the next; with the warm-up on, a zygote of their own."""
    monkeypatch.setenv(kept.KEEP_ENV, "1")
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "1")
    monkeypatch.setenv("HARNESS_TEST_KEPT_ZYGOTES", "work")  # a key no other test shares
    (record,) = _run([replace(_task(tmp_path, TINY, "tiny_mlp"), run_id="kept-work")])[0]
    assert record.worker is not None and record.worker.zygote_pid is not None

    def work_forks_from() -> int | None:
        pool = kept.ZygotePool()
        try:
            done = pool.call(Work(zygote_of_this_work, None, "torchscript", 18, timeout_s=120))
        finally:
            pool.close()
        assert done.failure is None, done.failure
        return done.value

    assert work_forks_from() == record.worker.zygote_pid
    assert work_forks_from() == record.worker.zygote_pid  # kept again by the first work
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "0")
    assert work_forks_from() not in (record.worker.zygote_pid, None, os.getpid())


def test_an_exporter_pair_waits_for_the_memory_the_cells_hold(tmp_path: Path) -> None:
    """A local run's exporter pairs reserve their need from the account its cells reserve
    from (two 4.9 GB graphs of a pair beside a cell's reservation overran the machine): held
    by a stand-in for the cells, the machine's memory leaves the pair no room, and no pair
    process starts until it is given back."""
    from tests.cell.test_paired import KEY, matmul_chain
    from tests.cell.test_paired import QUICK as PAIR_PLAN

    memory = local.machine_memory()
    cells = local.LocalTasks()
    assert cells.memory is memory
    cells.close()
    task = PairTask(KEY, "m", matmul_chain(tmp_path, 4), matmul_chain(tmp_path, 4, identity=True),
                    plan=PAIR_PLAN)  # fmt: skip
    results: list[PairResult] = []
    children = len(multiprocessing.active_children())
    with memory.reserved(memory.capacity - pair_need_gb(task) / 2):
        pairs = threading.Thread(target=local.time_pairs, args=([task], results.append))
        pairs.start()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            assert len(multiprocessing.active_children()) == children and not results
            time.sleep(0.05)
    pairs.join(timeout=120)
    assert len(results) == 1 and results[0].error is None and results[0].pairs >= 20

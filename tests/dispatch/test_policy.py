"""What dispatch decides, without Ray (harness/dispatch/policy.py): per-resource slots, the
order cells go in, when a cell's clock runs, and whose fault a dead task is."""

from __future__ import annotations

from dataclasses import replace

from harness.dispatch.policy import (
    Backlog,
    Evidence,
    InFlight,
    Slots,
    StartBoard,
    Suspect,
    Verdict,
    judge,
    no_run,
    node_in_message,
)
from harness.store.records import Cell, CellTask
from harness.store.status import Status


def _task(model: str, device: str = "cpu", *, threads: int = 1) -> CellTask:
    cell = Cell(model, "torchscript", 17, device=device)
    return CellTask(cell=cell, source="zoo.py", run_id="r", run_dir="/tmp/r", threads=threads)


# -- slots -------------------------------------------------------------------------------


def test_slots_are_counted_per_node_and_per_resource() -> None:
    nodes = [{"CPU": 16.0, "GPU": 1.0}, {"CPU": 3.0}, {"CPU": 0.0}]  # a GPU box, a CPU box, a head
    assert Slots.of_nodes(nodes, threads=1) == Slots(cpu=19, gpu=1)
    # 2 CPUs a cell: 8 + 1 (the odd CPU of the 3-CPU node is no slot)
    assert Slots.of_nodes(nodes, threads=2) == Slots(cpu=9, gpu=1)
    # A GPU on a node without the CPUs of a cell is no GPU slot.
    assert Slots.of_nodes([{"CPU": 1.0, "GPU": 2.0}], threads=2) == Slots(cpu=0, gpu=0)
    assert Slots.of_nodes([{"CPU": 4.0, "GPU": 8.0}], threads=1) == Slots(cpu=4, gpu=4)


def test_a_cuda_cell_needs_a_gpu_slot_and_a_cpu_slot() -> None:
    slots = Slots(cpu=2, gpu=1)
    assert slots.fits("cuda", running=0, running_gpu=0)
    assert not slots.fits("cuda", running=1, running_gpu=1)  # the one GPU is taken
    assert slots.fits("cpu", running=1, running_gpu=1)  # ... a CPU cell still goes
    assert not slots.fits("cuda", running=2, running_gpu=0)  # every CPU slot taken
    assert Slots(cpu=3, gpu=2).capped(1) == Slots(cpu=1, gpu=1)


# -- the order cells go in -----------------------------------------------------------------


def _drain(backlog: Backlog, slots: Slots, running: list[CellTask]) -> list[str]:
    """Take cells while they fit beside `running` (which grows as they go)."""
    taken = []
    while True:
        gpu = sum(t.cell.device == "cuda" for t in running)
        task = backlog.next_fitting(slots, running=len(running), running_gpu=gpu)
        if task is None:
            return taken
        running.append(task)
        taken.append(f"{task.cell.model}/{task.cell.device}")


def test_cuda_cells_wait_for_the_gpu_while_cpu_cells_behind_them_go() -> None:
    """One GPU, three CPU slots, and the plan's order mixing both kinds: the second and
    third CUDA cells are held back (not submitted to wait in Ray's queue with their clock
    running) and the CPU cells behind them take the free CPU slots."""
    plan = [_task("a", "cuda"), _task("b", "cuda"), _task("c", "cuda"), _task("d"), _task("e")]
    backlog, running = Backlog(plan), []
    assert _drain(backlog, Slots(cpu=3, gpu=1), running) == ["a/cuda", "d/cpu", "e/cpu"]
    running.pop(0)  # the CUDA cell finishes: the next one goes
    assert _drain(backlog, Slots(cpu=3, gpu=1), running) == ["b/cuda"]
    running.clear()
    assert _drain(backlog, Slots(cpu=3, gpu=1), running) == ["c/cuda"]
    assert not backlog


def test_a_cell_to_run_again_goes_first_and_the_backlog_holds_a_bounded_number() -> None:
    backlog = Backlog([_task(f"m{i}") for i in range(10)], held_max=3)
    assert _drain(backlog, Slots(cpu=1, gpu=0), []) == ["m0/cpu"]
    assert sum(map(len, backlog.held.values())) == 3  # pulled no further than it may hold
    backlog.again(_task("lost"))
    assert _drain(backlog, Slots(cpu=1, gpu=0), []) == ["lost/cpu"]
    assert _drain(backlog, Slots(cpu=1, gpu=0), []) == ["m1/cpu"]


def test_without_a_gpu_slot_cuda_cells_are_held_not_submitted() -> None:
    backlog = Backlog([_task("a", "cuda"), _task("b")])
    assert _drain(backlog, Slots(cpu=2, gpu=0), []) == ["b/cpu"]
    assert [t.cell.model for t in backlog.held["cuda"]] == ["a"]
    assert backlog  # still holds the CUDA cell


# -- clocks ----------------------------------------------------------------------------------


def test_a_cells_clock_starts_when_it_runs_not_when_it_is_submitted() -> None:
    flight = InFlight(_task("a"), 1, submitted=100.0)
    assert not flight.expired(now=10_000.0, timeout_s=60)  # queued for hours: no timeout
    flight = flight.start(node="n1", host="h", pid=7, at=1.7e9, now=500.0)
    assert not flight.expired(now=559.0, timeout_s=60)
    assert flight.expired(now=561.0, timeout_s=60)
    assert flight.ran_for(561.0) == 61.0
    record = no_run(flight.task, Status.TIMEOUT, "no result", flight)
    assert record.worker is not None and (record.worker["node"], record.worker["pid"]) == ("n1", 7)
    assert record.worker["started_at"] == 1.7e9


# -- whose fault a dead task is --------------------------------------------------------------


def _suspect(evidence: Evidence, node: str | None) -> Suspect:
    """A dead task; with a node, one whose start report named that node."""
    flight = InFlight(_task("a"), 1)
    if node is not None:
        flight = flight.start(node=node, host="h", pid=7, at=1.7e9, now=990.0)
    crashed = no_run(flight.task, Status.CRASHED, "worker died")
    return Suspect(flight, crashed, evidence, node, since=1000.0)


def test_a_dead_worker_on_a_dead_node_is_retried_as_soon_as_the_node_is_seen_dead() -> None:
    suspect = _suspect(Evidence.WORKER, "n1")
    assert judge(suspect, node_alive=True, now=1005.0, settle_s=60) is Verdict.WAIT
    assert judge(suspect, node_alive=False, now=1013.0, settle_s=60) is Verdict.RETRY


def test_a_crash_on_a_node_that_stays_alive_is_the_cells_own() -> None:
    suspect = _suspect(Evidence.WORKER, "n1")
    assert judge(suspect, node_alive=True, now=1061.0, settle_s=60) is Verdict.OWN


def test_ray_saying_the_node_died_waits_for_its_state_then_stands() -> None:
    suspect = _suspect(Evidence.NODE, "n1")
    assert judge(suspect, node_alive=True, now=1001.0, settle_s=60) is Verdict.WAIT
    assert judge(suspect, node_alive=False, now=1013.0, settle_s=60) is Verdict.RETRY
    assert judge(suspect, node_alive=True, now=1061.0, settle_s=60) is Verdict.RETRY


def test_a_worker_that_died_before_its_cell_started_is_retried() -> None:
    assert judge(_suspect(Evidence.WORKER, None), node_alive=None, now=1000.0, settle_s=60) is (
        Verdict.RETRY
    )


def test_a_cell_taken_to_run_where_unknown_is_judged_like_one_on_a_live_node() -> None:
    """Its start report may have been lost (the start board was unreachable): a dead
    worker is then not taken for one that never began."""
    unknown = _suspect(Evidence.WORKER, None)
    # assumed when a drain of the board failed
    suspect = replace(unknown, flight=unknown.flight.assumed_started(990.0))
    assert judge(suspect, node_alive=None, now=1001.0, settle_s=60) is Verdict.WAIT
    assert judge(suspect, node_alive=None, now=1061.0, settle_s=60) is Verdict.OWN


def test_the_start_board_hands_each_report_over_once() -> None:
    board = StartBoard()
    board.started((1, "n1", "h", 7, 1.7e9))
    board.started((2, "n2", "h", 8, 1.7e9))
    assert [s[0] for s in board.drain()] == [1, 2]
    assert board.drain() == []


def test_the_node_is_read_from_rays_node_death_message() -> None:
    message = (
        "Task failed because the node it was running on is dead or unavailable. Node IP:"
        " 192.0.2.2, node ID: 0ac1bf74ee5125e7007a3b08c0749d2f639f157bd69897c529ce3c0c. This"
        " can happen if the node was preempted"
    )  # Ray 2.60's NodeDiedError, as seen when a raylet was killed here
    assert node_in_message(message) == "0ac1bf74ee5125e7007a3b08c0749d2f639f157bd69897c529ce3c0c"
    assert node_in_message("The worker died unexpectedly while executing this task.") is None

"""What dispatch decides, without Ray (harness/dispatch/policy.py): per-resource slots, the
order cells go in, when a cell's clock runs and when its task is past saving, whose fault a
dead task is, how often a cell whose node died runs again, and which cells no alive node
can run. Every state here is made by hand: nothing starts Ray."""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness.dispatch.backlog import Backlog
from harness.dispatch.flight import InFlight, StartBoard, no_run, started
from harness.dispatch.policy import (
    BOARD_MISSES_MAX,
    ISOLATION_GRACE_S,
    MAX_ATTEMPTS,
    Board,
    DispatchStats,
    End,
    Evidence,
    Failure,
    Nodes,
    Options,
    Slots,
    Suspect,
    TaskFailure,
    Verdict,
    Wait,
    completes,
    drained,
    failure_record,
    judge,
    next_attempt,
    node_in_message,
    past_backstop,
    queued,
    settled,
    suspect_of,
    unrunnable,
    unrunnable_reason,
    wait_for,
    waiting,
)
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status


def _task(
    model: str, device: str = "cpu", *, threads: int = 1, memory_gb: float | None = None
) -> CellTask:
    cell = Cell(model, "torchscript", 17, device=device)
    return CellTask(
        cell=cell, source="zoo.py", run_id="r", run_dir="/tmp/r", threads=threads,
        memory_gb=memory_gb,
    )  # fmt: skip


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


def test_a_cell_waiting_for_memory_lets_later_cells_that_fit_go_and_goes_first_after() -> None:
    """16 GB free: a 10 GB cell runs; the next one needs 12 GB, so it is held while the
    2 GB cells behind it take the free slot; once the first ends, it goes before them."""
    plan = [_task("big-a", memory_gb=10), _task("big-b", memory_gb=12)]
    plan += [_task(f"small-{i}", memory_gb=2) for i in range(3)] + [_task("unsized")]
    backlog, running = Backlog(plan), []

    def drain() -> list[str]:
        taken = []
        while True:
            free = 16 - sum(t.memory_gb or 0 for t in running)
            gpu = 0
            task = backlog.next_fitting(
                Slots(cpu=2, gpu=0), running=len(running), running_gpu=gpu, memory_free_gb=free
            )
            if task is None:
                return taken
            running.append(task)
            taken.append(task.cell.model)

    assert drain() == ["big-a", "small-0"]
    assert [t.cell.model for t in backlog.held["cpu"]][:2] == ["big-b", "small-1"]
    running.remove(plan[0])  # big-a ends: 14 GB free, big-b goes before small-1
    assert drain() == ["big-b"]
    running.remove(plan[2])  # small-0 ends: 2 GB free
    assert drain() == ["small-1"]
    running.remove(plan[1])
    assert drain() == ["small-2"]  # the unsized one has no need, and goes at the next slot
    running.clear()
    assert drain() == ["unsized"] and not backlog


def test_the_nodes_memory_is_what_the_alive_ones_offer_less_the_cells_in_flight() -> None:
    gib = 1024**3
    ray_nodes = [
        {"NodeID": "a", "Alive": True, "Resources": {"CPU": 2.0, "memory": 16.0 * gib}},
        {"NodeID": "b", "Alive": True, "Resources": {"CPU": 2.0, "memory": 4.0 * gib}},
        {"NodeID": "c", "Alive": False, "Resources": {"CPU": 2.0, "memory": 64.0 * gib}},
    ]
    nodes = Nodes.of_ray(ray_nodes, Options(timeout_s=60))
    flights = [InFlight(_task("a", memory_gb=5.5), 1, 0.0), InFlight(_task("b"), 2, 0.0)]
    assert nodes.memory_gb == 20.0 and nodes.memory_free_gb(flights) == 14.5
    unsaid = Nodes.of_ray([{"NodeID": "a", "Alive": True, "Resources": {"CPU": 2.0}}], Options(60))
    assert unsaid.memory_free_gb(flights) == float("inf")  # no memory said: nothing held for it


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
    assert record.worker is not None and (record.worker.node, record.worker.pid) == ("n1", 7)
    assert record.worker.started_at == 1.7e9


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


# -- a task that returned no record, when its error arrives ----------------------------------

TWO_NODES = Nodes({"n1": True, "n2": True}, Slots(cpu=2, gpu=0))
ONE_NODE = Nodes({"n1": True}, Slots(cpu=2, gpu=0))


def _lost(evidence: Evidence | None, nodes: Nodes, *, last_words: bool = False) -> Suspect | None:
    flight = InFlight(_task("a"), 1).start(node="n1", host="h", pid=7, at=1.7e9, now=990.0)
    record = no_run(flight.task, Status.CRASHED, "worker died", flight)
    return suspect_of(
        record, flight, evidence, node="n1", nodes=nodes, last_words=last_words, now=1000.0
    )


def test_an_error_that_says_nothing_of_a_death_is_the_cells_record_at_once() -> None:
    """A task that raised, or was killed by Ray's memory monitor: no node to wait for."""
    assert _lost(None, TWO_NODES) is None


def test_a_dead_worker_with_last_words_or_on_the_only_node_crashed_by_itself() -> None:
    """The faulthandler log names the cell's fatal signal (a killed node's workers die
    without one); on a one-node cluster the node is the driver's, and alive."""
    assert _lost(Evidence.WORKER, TWO_NODES, last_words=True) is None
    assert _lost(Evidence.WORKER, ONE_NODE) is None


def test_a_dead_worker_without_last_words_on_a_cluster_waits_for_its_nodes_state() -> None:
    suspect = _lost(Evidence.WORKER, TWO_NODES)
    assert suspect is not None
    assert (suspect.node, suspect.since, suspect.evidence) == ("n1", 1000.0, Evidence.WORKER)
    assert suspect.crashed.status == "crashed"


def test_ray_saying_the_node_died_is_never_taken_for_the_cells_own_crash() -> None:
    """Even with last words, or on one node: the node's state decides."""
    assert _lost(Evidence.NODE, ONE_NODE) is not None
    assert _lost(Evidence.NODE, TWO_NODES, last_words=True) is not None


def test_settling_splits_the_decided_suspects_from_those_still_waiting() -> None:
    on_dead, on_live, fresh = (
        replace(_suspect(Evidence.WORKER, node), since=since)
        for node, since in (("n1", 1000.0), ("n2", 900.0), ("n2", 1000.0))
    )
    nodes = Nodes({"n1": False, "n2": True}, Slots(cpu=1, gpu=0))
    decided, waiting = settled([on_dead, on_live, fresh], nodes, now=1010.0, settle_s=60)
    assert decided == [(on_dead, Verdict.RETRY), (on_live, Verdict.OWN)]
    assert waiting == [fresh]


# -- how often a cell whose node died runs again ---------------------------------------------


def test_a_cell_whose_node_died_runs_again_until_its_attempts_are_spent() -> None:
    suspect = _suspect(Evidence.NODE, "n1")
    again = next_attempt(suspect)
    assert isinstance(again, CellTask) and again.attempt == 2
    assert again.cell == suspect.flight.task.cell
    last = replace(
        suspect, flight=replace(suspect.flight, task=replace(again, attempt=MAX_ATTEMPTS))
    )
    record = next_attempt(last)
    assert isinstance(record, Record)
    assert (record.status, record.attempt) == ("crashed", MAX_ATTEMPTS)
    assert f"each of {MAX_ATTEMPTS} attempts" in (record.error_message or "")
    assert record.worker is not None and record.worker.node == "n1"


# -- the driver's backstop -------------------------------------------------------------------


def test_a_task_is_killed_only_past_its_timeout_and_the_grace_from_its_start() -> None:
    """Its timeout, as long again (what the zygote may leave off the cell's clock for its
    waits for the node), and the grace."""
    options = Options(timeout_s=60)
    assert options.backstop_s == 2 * 60 + ISOLATION_GRACE_S
    flight = InFlight(_task("a"), 1, submitted=0.0)
    assert past_backstop(flight, 10_000.0, options) is None  # never started: queued
    flight = flight.start(node="n1", host="h", pid=7, at=1.7e9, now=100.0)
    assert past_backstop(flight, 100.0 + options.backstop_s, options) is None
    record = past_backstop(flight, 101.0 + options.backstop_s, options)
    assert record is not None and record.status == "timeout"
    assert f"no result after {options.backstop_s:g} s" in (record.error_message or "")


def test_start_reports_start_the_clocks_of_their_flights_only() -> None:
    a, b = InFlight(_task("a"), 1), InFlight(_task("b"), 2)
    (now_a,) = started([a, b], [(1, "n1", "h", 7, 1.7e9), (9, "n2", "h", 8, 1.7e9)], now=50.0)
    assert (now_a.flight_id, now_a.started, now_a.node) == (1, 50.0, "n1")
    assert a.started is None  # the flight itself is frozen: the driver keeps the new one
    # Where the board did not answer, a flight not known to run is taken to run from now.
    assert b.assumed_started(60.0).started == 60.0
    assert now_a.assumed_started(60.0).started == 50.0


# -- cells no alive node can run -------------------------------------------------------------


def test_cuda_cells_with_no_gpu_node_left_are_given_up_once_that_lasted_settle_s() -> None:
    """A GPU node died and none is left: the CUDA cells waiting for it are dropped after
    `settle_s` (a node may join meanwhile), while the CPU cells go on."""
    no_gpu = Slots(cpu=4, gpu=0)
    waiting = {"cuda": 2, "cpu": 5}
    drop, since = unrunnable(no_gpu, waiting, {}, now=100.0, settle_s=30)
    assert (drop, since) == (frozenset(), {"cuda": 100.0})
    drop, since = unrunnable(no_gpu, waiting, since, now=129.0, settle_s=30)
    assert (drop, since) == (frozenset(), {"cuda": 100.0})
    drop, since = unrunnable(no_gpu, waiting, since, now=130.0, settle_s=30)
    assert drop == {"cuda"}
    # A GPU node joined in time: the wait starts over.
    _, since = unrunnable(Slots(cpu=4, gpu=1), waiting, {"cuda": 100.0}, now=200.0, settle_s=30)
    assert since == {}
    # No cell waits: nothing to give up, however long there was no slot.
    assert unrunnable(Slots(0, 0), {"cuda": 0, "cpu": 0}, {"cpu": 0.0}, now=1e6, settle_s=30) == (
        frozenset(),
        {},
    )


def test_the_reason_of_an_unrunnable_cell_says_what_it_needs() -> None:
    assert unrunnable_reason("cuda", 4).endswith("(it needs 4 CPUs and 1 GPU)")
    assert unrunnable_reason("cpu", 2).endswith("(it needs 2 CPUs)")


def test_the_nodes_slots_come_from_the_alive_nodes_and_every_node_is_known() -> None:
    ray_nodes = [
        {"NodeID": "a", "Alive": True, "Resources": {"CPU": 4.0, "GPU": 1.0}},
        {"NodeID": "b", "Alive": False, "Resources": {"CPU": 8.0, "GPU": 2.0}},
    ]
    nodes = Nodes.of_ray(ray_nodes, Options(timeout_s=60, threads=2))
    assert nodes == Nodes({"a": True, "b": False}, Slots(cpu=2, gpu=1))
    capped = Nodes.of_ray(ray_nodes, Options(timeout_s=60, max_in_flight=1))
    assert capped.slots == Slots(cpu=1, gpu=1)


# -- the figures of one dispatch -------------------------------------------------------------


def test_the_final_counts_follow_the_records_handed_over() -> None:
    stats = DispatchStats()
    for status in (Status.CRASHED, Status.TIMEOUT, Status.NOT_ATTEMPTED, Status.CRASHED):
        stats.count_final(no_run(_task("a"), status, "why"))
    stats.count_submitted(running=3, running_gpu=1)
    stats.count_submitted(running=2, running_gpu=0)
    assert (stats.crashes, stats.timeouts, stats.not_attempted) == (2, 1, 1)
    assert (stats.submitted, stats.peak_in_flight, stats.peak_in_flight_gpu) == (2, 3, 1)
    assert stats.figures()["not_attempted"] == 1


# -- the start board, what the driver waits for, what counts as completed, a lost task's record


def test_a_board_that_misses_drains_times_cells_from_now_and_is_dropped_after_the_last() -> None:
    known, unknown = (
        InFlight(_task("a"), 1, submitted=0.0, started=2.0),
        InFlight(_task("b"), 2, submitted=0.0),
    )
    board, flights = drained(Board(), [known, unknown], None, now=5.0)
    assert board == Board(True, 1) and [f.started for f in flights] == [2.0, 5.0]
    for _ in range(BOARD_MISSES_MAX - 1):
        board, _ = drained(board, [], None, now=6.0)
    assert board == Board(False, BOARD_MISSES_MAX)
    assert not board.due(last_drained=0.0, now=100.0)
    assert board.on_submit(unknown).started == 0.0  # timed from its submission
    assert Board().on_submit(unknown).started is None


def test_a_board_that_answers_starts_the_reported_flights_and_forgives_its_misses() -> None:
    flight = InFlight(_task("a"), 7, submitted=0.0)
    board, flights = drained(Board(True, 2), [flight], [(7, "n1", "h", 42, 1.5)], now=3.0)
    assert board == Board(True, 0)
    assert [(f.flight_id, f.node, f.pid, f.started) for f in flights] == [(7, "n1", 42, 3.0)]
    assert Board().due(last_drained=0.0, now=0.5) and not Board().due(last_drained=0.1, now=0.5)


def test_what_the_driver_waits_for() -> None:
    assert wait_for(1, pending=False) is Wait.TASKS
    assert wait_for(1, pending=True) is Wait.TASKS
    assert wait_for(0, pending=True) is Wait.IDLE
    assert wait_for(0, pending=False) is Wait.DONE


def test_cells_waiting_for_a_slot_are_those_held_and_those_queued_but_not_started() -> None:
    flights = {
        "r1": InFlight(_task("a", "cuda"), 1),
        "r2": InFlight(_task("b", "cuda"), 2, started=1.0),
        "r3": InFlight(_task("c"), 3),
    }
    queue = queued(flights, ["cuda", "cpu"])
    assert queue == {"cuda": ["r1"], "cpu": ["r3"]}
    held = {"cuda": [_task("d", "cuda"), _task("e", "cuda")], "cpu": []}
    assert waiting(held, queue) == {"cuda": 3, "cpu": 1}


def test_a_task_cancelled_in_rays_queue_does_not_count_as_completed() -> None:
    stats = DispatchStats()
    for end in (End.COLLECTED, End.EXPIRED, End.DROPPED, End.COLLECTED):
        stats.count_end(end)
    assert stats.completed == 3 and not completes(End.DROPPED)


@pytest.mark.parametrize(
    ("failure", "status", "reason"),
    [
        (Failure.DIED, Status.CRASHED, "worker process died while running the cell: last words"),
        (Failure.MEMORY_MONITOR, Status.OOM, "killed by Ray's memory monitor: msg"),
        (Failure.RAISED, Status.HARNESS_ERROR, "task raised: msg"),
        (Failure.OTHER, Status.CRASHED, "msg"),
    ],
)
def test_the_record_of_a_task_that_returned_none(
    failure: Failure, status: Status, reason: str
) -> None:
    flight = InFlight(_task("a"), 1, submitted=10.0, started=12.0, node="n1")
    record = failure_record(flight, TaskFailure(failure, "msg"), "last words", now=20.0)
    assert (record.status, record.error_message) == (status, reason)
    assert record.duration_s == 8.0 and record.worker is not None and record.worker.node == "n1"

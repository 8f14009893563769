"""Paired, interleaved re-measurement with real onnxruntime on tiny graphs: a copy of a
graph is "same", a graph with real extra work is "slower", a missing graph is an error."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.cell.fingerprint import graph_fingerprint
from harness.cell.paired import time_pair
from harness.stats import interval_width
from harness.store.graphs import INPUTS, MODEL, entry_dir
from harness.store.paired import PairPlan, PairTask

KEY = ("m", "dynamo", 18, "cpu", False, "base")
# Units of 10 ms: at 1 ms one time slice taken by another worker's process made a unit up
# to 4 times as long (a graph against a free change of itself: estimate -0.16 in a CI run)
QUICK = PairPlan(min_pairs=20, round=20, max_pairs=200, max_s=4.0, warmup_s=0.1, unit_ms=10.0)


def matmul_chain(store: Path, layers: int, *, identity: bool = False) -> str:
    """x @ W repeated `layers` times (each layer is real work); `identity` adds a free op."""
    rng = np.random.default_rng(0)
    nodes, inits, last = [], [], "x"
    for i in range(layers):
        inits.append(
            numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32) / 8, f"w{i}")
        )
        nodes.append(helper.make_node("MatMul", [last, f"w{i}"], [f"h{i}"]))
        last = f"h{i}"
    if identity:
        nodes.append(helper.make_node("Identity", [last], ["out"]))
        last = "out"
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [32, 64])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, [32, 64])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    tmp = store / "tmp.onnx"
    store.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(tmp))
    entry = entry_dir(store, graph_fingerprint(tmp))
    entry.mkdir(parents=True, exist_ok=True)
    tmp.rename(entry / MODEL)
    np.savez(entry / INPUTS, x=rng.standard_normal((32, 64)).astype(np.float32))
    return str(entry / MODEL)


@pytest.mark.slow  # timed pairs: seconds each, and noise from a parallel worker
def test_a_graph_against_a_free_change_of_itself_is_not_slower(tmp_path: Path) -> None:
    a = matmul_chain(tmp_path, 8)
    b = matmul_chain(tmp_path, 8, identity=True)
    r = time_pair(PairTask(KEY, "m", a, b, plan=QUICK))
    assert r.error is None and r.pairs >= 20
    # Margins wide enough for a shared 2-core machine: the verdict, not a figure, is tested
    # here (benchmarks/test_calibrate_paired.py measures how close the estimates come).
    assert r.verdict in ("same", "unknown"), r
    assert abs(r.estimate) < 0.15
    assert r.runtime and r.runtime["session_options"]["session.force_spinning_stop"] == "1"


@pytest.mark.slow  # timed pairs: seconds each, and noise from a parallel worker
def test_a_graph_with_twice_the_work_is_slower(tmp_path: Path) -> None:
    a = matmul_chain(tmp_path, 8)
    b = matmul_chain(tmp_path, 16)
    r = time_pair(PairTask(KEY, "m", a, b, plan=QUICK))
    assert r.verdict == "slower", r
    assert 0.4 < r.estimate < 1.6 and r.low > 0


def test_a_graph_alone_is_timed_until_its_median_is_known_and_gives_no_ratio(
    tmp_path: Path,
) -> None:
    """A task of one graph (its model's other exporters failed): its calls alone, at least
    those of each side of `min_pairs` pairs, up to the plan's bound; the pair's bound of
    units and seconds holds it."""
    a = matmul_chain(tmp_path, 8)
    plan = replace(QUICK, min_pairs=3, max_pairs=40, margin=0.5)  # known at once
    r = time_pair(PairTask(KEY, "m", a, "", plan=plan))
    assert r.error is None and r.pairs == 0 and r.candidate_ms == ()
    assert len(r.baseline_ms) >= 6 and all(ms > 0 for ms in r.baseline_ms)
    # it stopped once its median was known that well, and not a call later
    width, before = interval_width(r.baseline_ms), interval_width(r.baseline_ms[:-1])
    assert width is not None and width <= plan.margin, r.baseline_ms
    assert len(r.baseline_ms) == 6 or (before is not None and before > plan.margin)
    never = replace(plan, margin=0.0)  # never known: a bound stops it
    timed = time_pair(PairTask(KEY, "m", a, "", plan=replace(never, max_s=0.05)))
    assert len(timed.baseline_ms) == 6  # 10-ms units: the minimum is past the 50 ms
    counted = time_pair(PairTask(KEY, "m", a, "", plan=replace(never, max_pairs=4, max_s=60)))
    assert len(counted.baseline_ms) == 8  # each side of 4 pairs
    assert counted.runtime and counted.runtime["session_options"]["intra_op_num_threads"] == 1


def test_a_missing_graph_is_an_error_result(tmp_path: Path) -> None:
    a = matmul_chain(tmp_path, 2)
    r = time_pair(PairTask(KEY, "m", a, str(tmp_path / "gone" / MODEL), plan=QUICK))
    assert r.error and r.pairs == 0 and r.verdict == "unknown"


@pytest.mark.parametrize(("call_s", "pairs"), [(0.0, 10), (0.02, 5)])
def test_short_calls_get_a_whole_round_and_long_ones_stop_at_the_minimum(
    call_s: float, pairs: int
) -> None:
    """The exporter pairs' plan (harness.pipeline.execute): judged after a round of 10, but
    a pair whose blocks outlast the bound stops at `min_pairs` (5). The units never agree
    on a verdict (their ratio swings), so only the bound and the minimum end the loop."""
    import itertools
    import time

    from harness.cell.paired import _blocks

    swings = itertools.cycle([1.0, 3.0, 1.0, 0.4])

    def unit() -> float:
        time.sleep(call_s)
        return next(swings)

    plan = PairPlan(min_pairs=5, round=10, max_s=0.3, max_pairs=10)
    task = PairTask(KEY, "m", "a", "b", plan=plan)
    result = _blocks(task, unit, unit, {})
    assert (len(result.log_ratios), result.verdict) == (pairs, "unknown")


def test_the_graphs_sessions_open_only_once_no_other_cell_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pair holds the node shared while it opens its sessions, as a cell does (real lock
    files, a real holder process): beside other cells' work, never beside another cell's
    timing (a run's pairs opened theirs during a cell's export timing); then times alone."""
    from harness.cell import paired
    from tests.conftest import node_held_alone, session_openings

    opened = session_openings(monkeypatch, paired)
    a, b = matmul_chain(tmp_path / "s", 4), matmul_chain(tmp_path / "s", 4, identity=True)
    with node_held_alone(monkeypatch, tmp_path / "locks", 1.5) as released:
        r = time_pair(PairTask(KEY, "m", a, b, plan=replace(QUICK, max_s=1.0)))  # order only
        let_go = released()
    assert r.error is None and r.pairs >= QUICK.min_pairs
    assert len(opened) == 2 and min(o.at for o in opened) >= let_go
    assert r.seconds > 1.0  # it waited for the node
    assert 1.0 < r.node_wait_s < r.seconds  # and says which of its seconds were the wait


def test_a_pair_that_fails_after_waiting_for_the_node_keeps_its_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A graph gone from the store fails the pair once it holds the node: its result is
    the error, and its seconds still say which of them it waited (another cell timing)."""
    from tests.conftest import node_held_alone

    a = matmul_chain(tmp_path / "s", 2)
    with node_held_alone(monkeypatch, tmp_path / "locks", 1.0) as released:
        asked = time.monotonic()
        r = time_pair(PairTask(KEY, "m", a, str(tmp_path / "gone.onnx"), plan=QUICK))
        let_go = released()
    assert r.error is not None and r.pairs == 0
    assert abs(r.node_wait_s - (let_go - asked)) < 0.2 and 0.5 < r.node_wait_s <= r.seconds


def _ask_alone_once_timing(folder: Path, seconds: float, out: Any) -> None:
    """A cell that asks for the node alone once the pair times on its core, and holds it."""
    from harness.cell import node

    while not list(folder.glob("timing-*")):
        time.sleep(0.01)
    time.sleep(0.2)
    with node.holding(folder) as lock:
        asked = time.monotonic()
        with lock.alone():
            began = time.monotonic()
            time.sleep(seconds)
    out.put((asked, began))


@pytest.mark.parametrize("alone", [False, True], ids=["pair", "one graph"])
def test_a_pair_lets_a_cell_waiting_to_time_alone_go_and_makes_up_the_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, alone: bool
) -> None:
    """A pair on a core (real lock files, a real forked cell) lets a cell that asks for the
    node alone go after its current block, not at its end; its bound in seconds is kept
    for its own calls (the time it gave way is added), and counted as its wait."""
    import multiprocessing

    from harness.cell import node

    folder = tmp_path / "locks"
    monkeypatch.setenv(node.FOLDER_ENV, str(folder))
    folder.mkdir()
    a = matmul_chain(tmp_path / "s", 8)
    b = "" if alone else matmul_chain(tmp_path / "s", 8, identity=True)
    # never known: a pair never judged (its minimum out of reach), a graph alone never
    # within a zero margin; their bound in seconds stops both
    never_known = replace(QUICK, min_pairs=5 if alone else 10**6, max_pairs=10**6, margin=0.0)
    out = multiprocessing.get_context("fork").Queue()
    other = multiprocessing.get_context("fork").Process(
        target=_ask_alone_once_timing, args=(folder, 1.0, out)
    )
    other.start()
    r = time_pair(PairTask(KEY, "m", a, b, plan=replace(never_known, max_s=1.5)))
    other.join(timeout=30)
    asked, began = out.get(timeout=5)
    assert r.error is None
    assert began - asked < 0.3, began - asked  # after the pair's block, not its end
    assert r.node_wait_s > 0.95 and r.seconds >= 1.5 + 1.0, r  # the bound made up

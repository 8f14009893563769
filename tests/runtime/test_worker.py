"""The worker in-process (no Ray): one cell start to finish, real export and onnxruntime."""

from __future__ import annotations

import os
import time
from dataclasses import replace
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
import torch

from harness.cell.ort import CudaProviderMissing, OrtRunner
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.runtime.warmup import (
    SKIP_ENV,
    WARM_UP_MODEL_MIN_OPSET,
    WarmUpModel,
    _warm_up,
    warm_up_exporter,
)
from harness.runtime.worker import run_cell
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask
from tests.conftest import FIXTURES

QUICK = Protocol(warmup_min_iters=2, warmup_max_s=0.1, min_iters=5, min_time_s=0.02, max_time_s=0.2)


def _task(
    tmp_path: Path,
    source: Path,
    model: str,
    exporter: str = "torchscript",
    dynamic: bool = False,
    device: str = "cpu",
) -> CellTask:
    cell = Cell(model, exporter, 17, device=device, dynamic=dynamic)
    return CellTask(cell, str(source), "r", str(tmp_path), protocol=QUICK)


def test_ok_cell_measures_everything(tmp_path: Path) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp", dynamic=True))
    assert r.status == "ok", r.error_message
    assert r.export.opset_actual == 17 and r.export.onnx_ops and r.export.onnx_nodes
    assert r.export.aten_ops == {"aten.linear": 2, "aten.sigmoid": 1}
    assert [c.name for c in r.numerics.checks or []] == ["output_0", "output_0@second_shape"]
    assert r.ort.latency and r.ort.latency.n >= 5 and r.speedup and r.duration_s
    assert r.export.graph_fingerprint and len(r.export.graph_fingerprint) == 64
    assert r.ort.runtime and r.ort.runtime.providers == ("CPUExecutionProvider",)
    assert (r.ort.runtime.session_options or {})["intra_op_num_threads"] == 1


def test_latency_at_the_protocols_other_thread_counts_is_kept_by_count(tmp_path: Path) -> None:
    """`latency_threads`: ORT and eager timed again at each count but the cell's own (0:
    the node's cores), each with its samples, under the record's `thread_latency`."""
    protocol = replace(QUICK, latency_threads=(1, 3, 0))
    task = replace(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp"), protocol=protocol)
    r = run_cell(task)
    assert r.status == "ok", r.error_message
    cores = os.cpu_count() or 1
    assert sorted(r.thread_latency or {}) == sorted({"3", str(cores)} - {"1"})
    for at in (r.thread_latency or {}).values():
        assert at.ort_latency_ms.n >= QUICK.min_iters and at.eager_latency_ms.n >= QUICK.min_iters
    assert r.ort.runtime and (r.ort.runtime.session_options or {})["intra_op_num_threads"] == 1


def test_the_budget_cuts_the_other_loops_never_the_records_own(tmp_path: Path) -> None:
    """`budget_s` spent before any loop starts: the record's loop (the cell's threads) still
    runs to the protocol's minimum, the loop at another thread count stops at its cap's
    floor, a quarter of it (in one shared budget, Qwen3-0.6B's p50 came from 4 calls).
    Tiny calls: a loop's blocks of 25 ms hold hundreds."""
    least = 20_000
    protocol = replace(
        QUICK, min_iters=least, max_iters=10 * least, min_time_s=0.0, max_time_s=60.0,
        budget_s=1e-9, latency_threads=(3,),
    )  # fmt: skip
    task = replace(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp"), protocol=protocol)
    r = run_cell(task)
    assert r.status == "ok", r.error_message
    assert r.ort.latency is not None and r.eager.latency is not None
    assert min(r.ort.latency.n, r.eager.latency.n) >= least
    other = (r.thread_latency or {})["3"]
    assert least // 4 <= min(other.ort_latency_ms.n, other.eager_latency_ms.n) < least


def test_a_cells_timed_session_spins_within_its_calls_only(tmp_path: Path) -> None:
    """The record's runtime says how the timed session's pool waits: spinning allowed, and
    stopped as each call returns."""
    r = run_cell(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp"))
    assert r.status == "ok", r.error_message
    options = (r.ort.runtime.session_options if r.ort.runtime else None) or {}
    assert options["session.intra_op.allow_spinning"] == "1"
    assert options["session.force_spinning_stop"] == "1"


@pytest.mark.parametrize(("spinning", "spins_after"), [("in_calls", False), ("on", True)])
def test_a_pool_that_spins_in_calls_is_idle_once_its_call_returns(
    tmp_path: Path, spinning: str, spins_after: bool
) -> None:
    """What "in_calls" buys: after a call of a 2-thread session, ORT's default pool goes on
    spinning (this process's CPU time grows while it sleeps), one spinning in calls only
    does not (eager, timed next, has its cores). Real sessions, nothing mocked."""
    path = tmp_path / "mm.onnx"
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [256, 256])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [256, 256])
    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("MatMul", ["x", "x"], ["y"])], "g", [x], [y]
    )
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    runner = OrtRunner(path, 2, "cpu", spinning=spinning)  # type: ignore[arg-type]
    call = runner.bind(Inputs((torch.rand(256, 256),), {}, input_names=("x",)))
    spun = []
    for _ in range(3):  # the median of three: a parallel test may take the core a moment
        call()
        before = time.process_time()
        time.sleep(0.2)
        spun.append(time.process_time() - before)
    assert (sorted(spun)[1] > 0.02) is spins_after, spun


def test_the_same_cell_exported_twice_has_the_same_fingerprint(tmp_path: Path) -> None:
    task = _task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp")
    first, second = run_cell(task), run_cell(task)
    assert first.export.graph_fingerprint == second.export.graph_fingerprint is not None
    assert first.same_graph_as(second)


def test_export_memory_budget_fails_the_cell(tmp_path: Path) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "budget.py", "budget_zero"))
    assert (r.status, r.stage, r.error_type) == ("export_failed", "save", "MemoryBudgetExceeded")
    assert "x the weights" in (r.error_message or "")


def test_unknown_model_is_a_harness_error_record(tmp_path: Path) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "budget.py", "not_there"))
    assert r.status == "harness_error" and "not found" in (r.error_message or "")


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_warm_up_model_exports_from_its_minimum_opset(exporter: str) -> None:
    inputs = Inputs(WarmUpModel.example_inputs(), {}, ("image", "ids"))
    assert _warm_up(exporter, WARM_UP_MODEL_MIN_OPSET, WarmUpModel().eval(), inputs)


def test_warm_up_below_its_minimum_opset_is_quiet(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SKIP_ENV, "0")  # the suite's runs skip it (tests/conftest.py)
    warm_up_exporter("torchscript", 11)
    out, err = capfd.readouterr()
    assert "prim::Constant" not in out + err
    # and the model really would not export there, which is why the trivial one is used
    inputs = Inputs(WarmUpModel.example_inputs(), {}, ("image", "ids"))
    assert not _warm_up("torchscript", 11, WarmUpModel().eval(), inputs)


# -- CUDA cells: the CUDA execution provider or a failure, never a quiet CPU run ------------

HAS_CUDA_PROVIDER = "CUDAExecutionProvider" in ort.get_available_providers()


@pytest.mark.skipif(HAS_CUDA_PROVIDER, reason="this onnxruntime has the CUDA provider")
def test_a_cuda_cell_whose_onnxruntime_lacks_the_cuda_provider_is_ort_load_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU is the one stand-in (this machine has none): torch says a CUDA device
    exists, as on a GPU runner where the CPU-only onnxruntime won the install."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    task = _task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp", device="cuda")
    r = run_cell(task)
    assert (r.status, r.stage, r.error_type) == (
        "ort_load_failed",
        "ort_session",
        "CudaProviderMissing",
    )
    assert "no CUDAExecutionProvider" in (r.error_message or "")
    assert "gpu" in (r.error_message or "")  # says which extra to install


@pytest.mark.skipif(HAS_CUDA_PROVIDER, reason="this onnxruntime has the CUDA provider")
@pytest.mark.filterwarnings("ignore:Specified provider 'CUDAExecutionProvider'")
def test_a_session_that_falls_back_to_the_cpu_is_refused_for_a_cuda_cell(tmp_path: Path) -> None:
    """ORT, asked for the CUDA provider it cannot give, warns and runs on the CPU; the
    runner refuses that session (stage ort_session). Nothing is mocked."""
    path = tmp_path / "relu.onnx"
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)]), path)
    assert OrtRunner(path, 1, "cpu").session.get_providers() == ["CPUExecutionProvider"]
    with pytest.raises(StageFailure) as failure:
        OrtRunner(path, 1, "cuda")
    assert failure.value.stage == "ort_session"
    assert isinstance(failure.value.error, CudaProviderMissing)
    assert "got ['CPUExecutionProvider'], not CUDA" in str(failure.value.error)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is here")
def test_a_cuda_cell_on_a_worker_without_a_cuda_device_is_skipped_with_the_reason(
    tmp_path: Path,
) -> None:
    r = run_cell(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp", device="cuda"))
    assert (r.status, r.reason) == ("skipped", "no CUDA device on this worker")


def test_an_ok_cells_graph_is_kept_once_by_fingerprint(tmp_path: Path) -> None:
    from dataclasses import replace

    from harness.store.graphs import INPUTS, store_size, stored_model

    store = tmp_path / "run" / "graphs"
    task = replace(
        _task(tmp_path / "run", FIXTURES / "tiny" / "models.py", "tiny_mlp"), graph_store=str(store)
    )
    first, second = run_cell(task), run_cell(task)
    assert first.artifacts["graph"] == second.artifacts["graph"]
    assert first.artifacts["graph"].startswith("graphs/")  # relative: inside the run
    model = stored_model(tmp_path / "run", first)
    assert model is not None and (model.parent / INPUTS).is_file()
    assert model.parent.name == first.export.graph_fingerprint
    assert store_size(store)[0] == 1
    from harness.cell.fingerprint import graph_fingerprint

    assert graph_fingerprint(model) == first.export.graph_fingerprint  # re-saved, same graph


# -- odd outputs ---------------------------------------------------------------------------------

ODD = FIXTURES / "odd_outputs" / "models.py"


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_a_model_that_returns_none_is_a_harness_error_at_reference(
    tmp_path: Path, exporter: str
) -> None:
    """It used to be ort_load_failed at ort_session, blaming ONNX Runtime."""
    r = run_cell(_task(tmp_path, ODD, "returns_none", exporter=exporter))
    assert (r.status, r.stage, r.error_type) == ("harness_error", "reference", "NoOutputs")
    assert "the model returns no tensor (NoneType): nothing to compare" in (r.error_message or "")
    assert r.export.seconds is None  # nothing was exported


@pytest.mark.parametrize("model", ["all_nan", "empty_output"])
def test_an_output_with_nothing_to_compare_has_no_error_sizes(tmp_path: Path, model: str) -> None:
    """NaN throughout (on both sides) and no elements used to read max_abs 0.0."""
    r = run_cell(_task(tmp_path, ODD, model))
    assert r.status == "ok", r.error_message
    (check,) = r.numerics.checks or []
    assert check.ok and check.mismatches == 0
    assert (check.max_abs, check.max_rel, check.rmse) == (None, None, None)


def test_keep_onnx_keeps_the_model_of_a_cell_that_exported_and_then_failed(tmp_path: Path) -> None:
    """Only passing cells used to keep theirs: the failing one is the one to debug."""
    source = FIXTURES / "fidelity" / "wrong_constant.py"
    task = CellTask(Cell("wrong_constant", "dynamo", 18), str(source), "r", str(tmp_path),
                    protocol=QUICK, keep_onnx=True)  # fmt: skip
    r = run_cell(task)
    assert (r.status, r.stage) == ("numerics_mismatch", "numerics")
    kept = tmp_path / r.artifacts["onnx"]
    assert kept.name == "model.onnx" and {"error", "repro"} <= set(r.artifacts)
    model = onnx.load(str(kept))  # loads with its external data, as saved
    assert any(n.domain == "" and n.op_type == "Add" for n in model.graph.node)
    assert r.export.onnx_bytes == sum(f.stat().st_size for f in kept.parent.glob("model.onnx*"))


def test_keep_onnx_keeps_nothing_where_nothing_exported(tmp_path: Path) -> None:
    task = CellTask(Cell("tiny_cummax", "torchscript", 17), str(FIXTURES / "tiny" / "models.py"),
                    "r", str(tmp_path), protocol=QUICK, keep_onnx=True)  # fmt: skip
    r = run_cell(task)
    assert r.status == "export_failed" and "onnx" not in r.artifacts


def test_each_timed_session_is_gone_before_the_next_thread_count_opens_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two timed sessions at once did not fit Gemma-3-1B's memory ceiling (a 4 GB graph: the
    2-thread session's initialisation failed with std::bad_alloc while the 1-thread one was
    still held by its loop): when a session opens, every earlier timed session is freed.
    Real sessions of a real export; each opening checks the ones before it."""
    from harness.runtime import latency
    from harness.store.measures import Measurements
    from tests.conftest import session_openings

    model = torch.nn.Linear(8, 4).eval()
    x = torch.rand(2, 8)
    torch.onnx.export(model, (x,), tmp_path / "m.onnx", input_names=["input_0"], dynamo=False)
    opened = session_openings(monkeypatch, latency)
    protocol = replace(QUICK, latency_threads=(1, 2, 3))
    m = Measurements()
    latency.measure(OrtRunner(tmp_path / "m.onnx", 1, "cpu"), model,
                    {"base": (None, Inputs((x,), {}))}, protocol, m)  # fmt: skip
    assert [o.alive_before for o in opened] == [0, 0, 0]  # the cell's 1 thread, then 2, 3
    assert set(m.thread_latency or {}) == {"2", "3"}


def test_a_cell_that_leaves_its_latency_to_its_pair_times_eager_alone_at_its_threads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With `ort_from_pairs` no session opens at the cell's threads: eager is timed there by
    itself, to the protocol's caps, and the other thread counts as before (real sessions of
    a real export)."""
    from harness.runtime import latency
    from harness.store.measures import Measurements
    from tests.conftest import session_openings

    model = torch.nn.Linear(8, 4).eval()
    x = torch.rand(2, 8)
    torch.onnx.export(model, (x,), tmp_path / "m.onnx", input_names=["input_0"], dynamo=False)
    opened = session_openings(monkeypatch, latency)
    protocol = replace(QUICK, latency_threads=(1, 2), pair_exporters=True, ort_from_pairs=True)
    m = Measurements()
    latency.measure(OrtRunner(tmp_path / "m.onnx", 1, "cpu"), model,
                    {"base": (None, Inputs((x,), {}))}, protocol, m)  # fmt: skip
    assert len(opened) == 1  # the 2-thread session alone
    assert m.ort.latency is None and m.ort.runtime is None
    assert m.eager.latency and m.eager.latency.n >= QUICK.min_iters and m.eager.timed_by is None
    assert set(m.thread_latency or {}) == {"2"}
    own, own_loop = Measurements(), replace(protocol, ort_from_pairs=False)
    latency.measure(OrtRunner(tmp_path / "m.onnx", 1, "cpu"), model,
                    {"base": (None, Inputs((x,), {}))}, own_loop, own)  # fmt: skip
    assert own.ort.latency and own.ort.runtime and len(opened) == 3


def test_the_timed_session_opens_while_another_cell_holds_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Only the loops hold the node alone (harness.cell.node): the latency stage's timed
    session is opened beside another cell's timing (real lock files, a real holder
    process), and the loop waits for its turn."""
    from harness.runtime import latency
    from harness.store.measures import Measurements
    from tests.conftest import node_held_alone, session_openings

    model = torch.nn.Linear(8, 4).eval()
    x = torch.rand(2, 8)
    torch.onnx.export(model, (x,), tmp_path / "m.onnx", input_names=["input_0"], dynamo=False)
    runner = OrtRunner(tmp_path / "m.onnx", 1, "cpu")
    opened = session_openings(monkeypatch, latency)
    m = Measurements()
    with node_held_alone(monkeypatch, tmp_path / "locks", 1.5) as released:
        latency.measure(runner, model, {"base": (None, Inputs((x,), {}))}, QUICK, m)
        let_go = released()
    assert len(opened) == 1 and opened[0].at < let_go
    assert m.ort.latency and m.ort.latency.n >= QUICK.min_iters


def test_cells_run_in_one_hold_each_record_only_their_own_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Debt's tries run cells inside one hold of the node: the hold's wait to start (here
    behind a real holder process timing alone for 1 s) is the work's, and no cell's record
    carries it or a cell before it's (each took the lock's running total)."""
    from harness.cell import node
    from tests.conftest import node_held_alone

    task = _task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp")
    before = node.process_waited_s()
    with node_held_alone(monkeypatch, tmp_path / "locks", 1.0), node.holding():
        work_waited = node.process_waited_s() - before
        records = [run_cell(task), run_cell(task)]
    assert work_waited > 0.5  # the work waited for the holder
    assert [r.status for r in records] == ["ok", "ok"]
    waits = [r.worker.node_wait_s if r.worker else None for r in records]
    assert all(w is None or w < 0.2 for w in waits), waits


def test_a_cell_timing_beside_another_cells_work_says_what_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a node of two cores (real lock files, a real neighbour process working through
    its build's steps the whole time) a 1-thread cell exports and times its latency loop on
    a core of its own beside it; its record names the neighbour's phase."""
    import multiprocessing

    from harness.cell import node

    monkeypatch.setattr(node, "node_cores", lambda: 2)
    monkeypatch.setenv(node.FOLDER_ENV, str(tmp_path / "locks"))
    working, done = multiprocessing.Event(), multiprocessing.Event()

    def neighbour() -> None:
        with node.holding(label="neighbour"):
            node.note_phase("build")
            working.set()
            while not done.wait(0.05):
                node.note_phase("build")  # each step of its build: a cell may go first

    other = multiprocessing.get_context("fork").Process(target=neighbour)
    other.start()
    try:
        assert working.wait(30)
        r = run_cell(_task(tmp_path, FIXTURES / "tiny" / "models.py", "tiny_mlp"))
    finally:
        done.set()
        other.join(30)
    assert r.status == "ok", r.error_message
    assert r.worker and r.worker.timed_beside == ("neighbour: build",)
    assert (r.worker.node_wait_s or 0.0) < 1.0  # the export waited for a step at most

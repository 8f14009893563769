"""Eager timed once per model (the protocol's share_eager; harness.runtime.latency.EagerShare):
what one cell writes down on the node, which cells of a run take it, and the latency stage
that times ORT alone where it does. Real ORT sessions of a real export; the node's folder is
the test's own."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from harness.cell import node
from harness.cell.ort import OrtRunner
from harness.cell.shapes import Inputs
from harness.errors import UsageError
from harness.runtime import latency
from harness.runtime.latency import SHARED_EAGER, SWEPT_AFTER_S, EagerShare
from harness.store.protocol import Protocol
from harness.store.records import Cell, CellTask, Measurements

QUICK = Protocol(
    warmup_min_iters=1, warmup_max_s=0.01, min_iters=5, min_time_s=0.01, max_time_s=0.1,
    share_eager=True, latency_threads=(2,),
)  # fmt: skip
X = Inputs((torch.rand(2, 8),), {})


@pytest.fixture(autouse=True)
def own_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "node"
    monkeypatch.setenv(node.FOLDER_ENV, str(folder))
    return folder


def task(exporter: str, run_dir: str = "/runs/a", **axes: object) -> CellTask:
    cell = Cell("m", exporter, 18, **axes)
    return CellTask(cell, "zoo.py", "run-1", run_dir, protocol=QUICK)


def test_a_later_cell_of_another_exporter_takes_what_the_first_wrote_down() -> None:
    first, later = EagerShare(task("dynamo")), EagerShare(task("torchscript"))
    key = first.key(1, X)
    assert later.find(later.key(1, X)) is None
    first.write(key, [2.0, 3.5, 1.25])
    assert later.find(later.key(1, X)) == ([2.0, 3.5, 1.25], "m dynamo@18 cpu")


@pytest.mark.parametrize(
    ("other", "threads", "inputs"),
    [
        (task("torchscript", dtype="float16"), 1, X),  # another axis: another eager
        (task("torchscript", run_dir="/runs/b"), 1, X),  # another run
        (task("torchscript"), 2, X),  # other threads
        (task("torchscript"), 1, Inputs((torch.rand(4, 8),), {})),  # another shape
    ],
)
def test_nothing_is_taken_across_axes_runs_threads_or_shapes(
    other: CellTask, threads: int, inputs: Inputs
) -> None:
    EagerShare(task("dynamo")).write(EagerShare(task("dynamo")).key(1, X), [1.0])
    share = EagerShare(other)
    assert share.find(share.key(threads, inputs)) is None


def test_a_torn_line_is_passed_over() -> None:
    """A cell killed while it wrote leaves half a line; the next entries still read."""
    first, later = EagerShare(task("dynamo")), EagerShare(task("torchscript"))
    first.path.parent.mkdir(parents=True)
    first.path.write_text('{"key": "half')
    with first.path.open("a") as out:
        out.write("\n")
    first.write(first.key(1, X), [4.0])
    assert later.find(later.key(1, X)) == ([4.0], "m dynamo@18 cpu")


def test_a_runs_first_write_sweeps_the_files_of_runs_long_gone(own_node: Path) -> None:
    folder = own_node / SHARED_EAGER
    folder.mkdir(parents=True)
    old, recent = folder / "old.jsonl", folder / "recent.jsonl"
    for path in (old, recent):
        path.write_text("")
    long_ago = time.time() - SWEPT_AFTER_S - 60
    os.utime(old, (long_ago, long_ago))
    share = EagerShare(task("dynamo"))
    share.write(share.key(1, X), [1.0])
    assert sorted(p.name for p in folder.iterdir()) == sorted([recent.name, share.path.name])


def test_only_the_protocols_share_eager_shares() -> None:
    plain = CellTask(Cell("m", "dynamo", 18), "zoo.py", "run-1", "/runs/a", protocol=Protocol())
    assert EagerShare.of(plain, Protocol()) is None
    shared = task("dynamo")
    assert shared.protocol is not None and EagerShare.of(shared, shared.protocol) is not None
    assert Protocol.from_table({"share_eager": True}, "s.toml").share_eager
    with pytest.raises(UsageError, match=r"share_eager must be true or false"):
        Protocol.from_table({"share_eager": 1}, "s.toml")


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def measured(model: torch.nn.Module, path: Path, exporter: str) -> Measurements:
    m = Measurements()
    runner = OrtRunner(path, 1, "cpu")
    latency.measure(runner, model, {"example": (None, X)}, QUICK, m, EagerShare(task(exporter)))
    return m


def test_the_later_cell_times_ort_alone_and_carries_the_first_cells_eager(tmp_path: Path) -> None:
    model, path = Tiny().eval(), tmp_path / "tiny.onnx"
    torch.onnx.export(model, X.args, str(path), dynamo=False, input_names=X.names())
    first = measured(model, path, "dynamo")
    later = measured(model, path, "torchscript")

    assert first.eager.timed_by is None and first.eager.latency is not None
    assert later.eager.timed_by == "m dynamo@18 cpu"
    assert later.eager.latency == first.eager.latency  # the same samples, not timed again
    assert later.ort.latency is not None and later.ort.latency.n >= QUICK.min_iters
    assert later.ort.latency.samples != first.ort.latency.samples  # its own ORT loop
    # at the protocol's other thread count too, each loop by its own key
    by_threads = later.thread_latency or {}
    first_at_2 = (first.thread_latency or {})["2"]
    assert first_at_2.eager_from is None
    assert by_threads["2"].eager_from == "m dynamo@18 cpu"
    assert by_threads["2"].eager_latency_ms == first_at_2.eager_latency_ms
    assert by_threads["2"].to_dict()["eager_from"] == "m dynamo@18 cpu"
    assert "eager_from" not in first_at_2.to_dict()  # records without a share are unchanged
    lines = [json.loads(x) for x in EagerShare(task("dynamo")).path.read_text().splitlines()]
    assert [line["timed_by"] for line in lines] == ["m dynamo@18 cpu"] * 2


# -- two cells of a model at their loops at once (each on a core of its own) ------------------


def test_the_first_claim_times_eager_and_a_dead_or_never_written_one_is_taken_over(
    own_node: Path,
) -> None:
    first, later = EagerShare(task("dynamo")), EagerShare(task("torchscript"))
    key = first.key(1, X)
    assert first.claim(key) and not later.claim(later.key(1, X))  # this process lives
    first.release(key)
    assert later.claim(key)  # released: the next one claims it
    claim = next((own_node / SHARED_EAGER).glob("*.claim"))
    claim.write_text(str(_a_dead_pid()))
    assert first.claim(key)  # its claimant died: taken over
    claim.write_text("")
    assert not later.claim(key)  # being written, for a moment
    old = time.time() - latency.CLAIM_WRITTEN_S - 1
    os.utime(claim, (old, old))
    assert later.claim(key)  # left empty by a process that died writing it


def _a_dead_pid() -> int:
    import subprocess

    done = subprocess.run(["true"], check=True)
    assert done.returncode == 0
    pid = max(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()) + 1000
    assert not node.alive(pid)
    return pid


def _measure_in_a_cell(exporter: str, path: Path, out: object, ready: object) -> None:
    """A cell's latency stage on a 2-core node, holding it as a cell does."""
    model = Tiny().eval()
    torch.manual_seed(0)
    with node.holding(label=exporter):
        ready.wait(30)  # type: ignore[attr-defined]
        m = measured(model, path, exporter)
    out.put((exporter, m.eager.timed_by, m.eager.latency, m.ort.latency))  # type: ignore[attr-defined]


def test_two_cells_of_a_model_at_their_loops_at_once_time_eager_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both cells time their 1-thread loop at once, each on a core of its own (real forked
    processes, real ORT): one times eager, the other times ORT alone and takes its samples."""
    import multiprocessing

    monkeypatch.setattr(node, "node_cores", lambda: 2)
    model, path = Tiny().eval(), tmp_path / "tiny.onnx"
    torch.onnx.export(model, X.args, str(path), dynamo=False, input_names=X.names())
    fork = multiprocessing.get_context("fork")
    out, ready = fork.Queue(), fork.Barrier(2)
    cells = [
        fork.Process(target=_measure_in_a_cell, args=(e, path, out, ready))
        for e in ("dynamo", "torchscript")
    ]
    for p in cells:
        p.start()
    found = {e: (by, eager, ort) for e, by, eager, ort in (out.get(timeout=60) for _ in cells)}
    for p in cells:
        p.join(30)
    takers = [e for e, (by, _, _) in found.items() if by is not None]
    assert len(takers) == 1, found
    (timer,) = set(found) - set(takers)
    (by, eager, ort), (_, timers_eager, _) = found[takers[0]], found[timer]
    assert by == f"m {timer}@18 cpu" and eager == timers_eager and ort is not None

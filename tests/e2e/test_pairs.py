"""The exporters' graphs timed in pairs through a real run (`pair_exporters`), and what a
resumed run keeps of them: a pair timed before the interruption stays in its records, and a
model whose first exporter's cell ran before it is paired once the others have run. The run
also times eager once per model (`share_eager`)."""

from __future__ import annotations

import json
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from harness.pipeline.pairing import LEDGER
from harness.store.details import ExporterSpeed
from harness.store.rundir import read_manifest, read_records
from tests.conftest import FIXTURES, run_cli

SUITE = """models = ["tiny_mlp", "tiny_conv"]
exporters = ["dynamo", "torchscript"]
opsets = [18]
dynamic = false

[protocol]
warmup_min_iters = 1
warmup_max_s = 0.05
min_iters = 5
min_time_s = 0.02
max_iters = 50
max_time_s = 0.2
pair_exporters = true
share_eager = true
"""


@pytest.fixture(scope="module")
def paired(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("pairs")
    (root / "pairs.toml").write_text(SUITE)
    out = root / "run"
    result = run_cli(
        "run", "--suite", str(root / "pairs.toml"), "--zoo", str(FIXTURES / "tiny"),
        "--keep-graphs", "--out", str(out), "--no-report", "--repro-bound", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_each_cell_gets_its_graphs_speed_against_the_fastest_exporters(paired: Path) -> None:
    records = read_records(paired)
    assert len(records) == 4 and all(r.status == "ok" for r in records)
    for model in ("tiny_mlp", "tiny_conv"):
        speeds = [r.exporter_speed for r in records if r.model == model]
        assert all(s is not None and s.error is None for s in speeds), speeds
        by_exporter = {r.exporter: r.exporter_speed for r in records if r.model == model}
        fastest = {s.fastest for s in speeds if s}
        assert len(fastest) == 1 and fastest <= {"dynamo", "torchscript"}, speeds
        (winner,) = fastest
        (other,) = set(by_exporter) - fastest
        # the fastest is 1 by definition, untimed against itself; the other was paired
        # with it (two near-equal graphs may round to a ratio of 1.0 too)
        assert by_exporter[winner] == ExporterSpeed(fastest=winner, ratio=1.0)
        slower = by_exporter[other]
        assert slower is not None and slower.pairs and slower.ratio and slower.ratio >= 1.0
        # the pair's own time: its sessions, warm-up and blocks, inside the run's own
        assert slower.seconds is not None and 0 < slower.seconds < _run_seconds(paired)
    assert not (paired / LEDGER).exists()  # every speed is in its record


def _run_seconds(run_dir: Path) -> float:
    """The run's wall time, from its manifest (to the second: one more for the rounding)."""
    manifest = read_manifest(run_dir)
    assert manifest.started and manifest.finished
    started, finished = map(datetime.fromisoformat, (manifest.started, manifest.finished))
    return (finished - started).total_seconds() + 1


def test_eager_is_timed_by_one_cell_of_each_model_and_taken_by_the_other(paired: Path) -> None:
    for model in ("tiny_mlp", "tiny_conv"):
        records = [r for r in read_records(paired) if r.model == model]
        timed = [r for r in records if r.eager.timed_by is None]
        assert len(timed) == 1, [r.eager.timed_by for r in records]
        (taker,) = [r for r in records if r is not timed[0]]
        assert taker.eager.timed_by == timed[0].cell.label()
        assert taker.eager.latency == timed[0].eager.latency
        assert taker.ort.latency is not None and timed[0].ort.latency is not None
        assert taker.ort.latency.samples != timed[0].ort.latency.samples
        assert taker.to_dict()["eager_timed_by"] == timed[0].cell.label()


def test_a_resumed_run_keeps_the_pairs_it_timed_and_times_those_it_began(
    paired: Path, tmp_path: Path
) -> None:
    """What an interrupted run leaves, made from the finished one: tiny_mlp's pair timed
    (its speeds in the ledger, not yet in the records), tiny_conv's dynamo cell recorded and
    its graph waiting in the store, its TorchScript cell never run. Both were lost: the
    resume paired only groups all of whose cells it ran itself."""
    cut = tmp_path / "cut"
    shutil.copytree(paired, cut)
    before = {(r.model, r.exporter): r for r in read_records(paired)}
    ledger, lines = [], []
    for (model, exporter), r in before.items():
        if model == "tiny_mlp" and r.exporter_speed is not None:
            ledger.append({"cell": r.cell.cell_id, "speed": r.exporter_speed.to_dict()})
        if (model, exporter) != ("tiny_conv", "torchscript"):
            lines.append(json.dumps(r.with_changes(exporter_speed=None).to_dict()))
    (cut / "records.jsonl").write_text("\n".join(lines) + "\n")
    (cut / LEDGER).write_text("".join(json.dumps(e) + "\n" for e in ledger))

    result = run_cli("run", "--resume", str(cut))
    assert result.returncode == 0, result.stderr[-3000:]
    after = {(r.model, r.exporter): r for r in read_records(cut)}
    assert len(after) == 4
    for exporter in ("dynamo", "torchscript"):
        assert (
            after["tiny_mlp", exporter].exporter_speed
            == before["tiny_mlp", exporter].exporter_speed
        )
    conv = [after["tiny_conv", e].exporter_speed for e in ("dynamo", "torchscript")]
    assert all(s is not None and s.error is None for s in conv), conv
    assert sorted(bool(s and s.pairs) for s in conv) == [False, True]  # the other was timed
    assert not (cut / LEDGER).exists()


@pytest.mark.parametrize("ort_from_pairs", [False, True])
def test_a_run_of_one_exporter_keeps_no_graph_for_pairs_it_never_times(
    tmp_path: Path, ort_from_pairs: bool
) -> None:
    """The pair protocol with one exporter: no cell has another exporter's graph to be
    timed against, so none stores its graph (each stayed in the run's graphs/ before: 2.3
    GB for a Qwen3-0.6B cell), and no record names one; with `ort_from_pairs` each cell
    times its ORT latency itself, no pair being there to."""
    (tmp_path / "pairs.toml").write_text(
        SUITE + f"ort_from_pairs = {str(ort_from_pairs).lower()}\n"
    )
    out = tmp_path / "run"
    result = run_cli(
        "run", "--suite", str(tmp_path / "pairs.toml"), "--zoo", str(FIXTURES / "tiny"),
        "--exporters", "dynamo", "--out", str(out), "--no-report", "--repro-bound", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = read_records(out)
    assert len(records) == 2 and all(r.status == "ok" for r in records)
    assert all("graph" not in r.artifacts and r.exporter_speed is None for r in records)
    assert all(r.ort.latency and r.ort.timed_in is None for r in records)
    assert not list(out.glob("graphs/**/model.onnx"))
    assert read_manifest(out).settings.graph_store is None


# -- ORT latency from the pairs (ort_from_pairs) ---------------------------------------------

ONE_EXPORTER_FAILS = '''
import torch

from harness.zoo import ModelSpec


class NotUnderExport(torch.nn.Module):
    """Runs eagerly and traces for TorchScript; torch.export (dynamo) refuses it."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():
            raise RuntimeError("not under torch.export")
        return torch.tanh(x) * 2


SPECS = [
    ModelSpec(
        name="not_under_export",
        family="seed",
        build=NotUnderExport,
        example_inputs=lambda: (torch.rand(4, 8),),
    ),
]
'''


@pytest.fixture(scope="module")
def from_pairs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_mlp, paired, and a model only TorchScript exports, under `ort_from_pairs`."""
    root = tmp_path_factory.mktemp("from-pairs")
    (root / "pairs.toml").write_text(SUITE + "ort_from_pairs = true\n")
    zoo = root / "zoo"
    zoo.mkdir()
    shutil.copy(FIXTURES / "tiny" / "models.py", zoo / "tiny.py")
    (zoo / "one_exporter.py").write_text(ONE_EXPORTER_FAILS)
    out = root / "run"
    result = run_cli(
        "run", "--suite", str(root / "pairs.toml"), "--zoo", str(zoo),
        "--models", "tiny_mlp,not_under_export", "--out", str(out), "--no-report",
        "--repro-bound", "0",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return out


def test_a_paired_cells_latency_is_its_graphs_calls_in_the_pair(from_pairs: Path) -> None:
    """Each of tiny_mlp's records has its ORT latency from the pair (at least each side's
    calls of its 5 pairs), eager from one cell's loop, and a speedup of the two."""
    records = [r for r in read_records(from_pairs) if r.model == "tiny_mlp"]
    assert len(records) == 2 and all(r.status == "ok" for r in records)
    for r in records:
        assert r.ort.timed_in == "pair" and r.exporter_speed is not None, r.exporter_speed
        assert r.ort.latency is not None and r.ort.latency.n >= 10
        assert r.ort.runtime and r.ort.runtime.session_options["intra_op_num_threads"] == 1
        assert r.eager.latency is not None and r.speedup is not None
    first, second = records
    assert first.ort.latency != second.ort.latency  # each its own side's
    assert sorted(r.eager.timed_by is None for r in records) == [False, True]


def test_a_cell_whose_models_other_exporter_failed_is_timed_alone(from_pairs: Path) -> None:
    by_exporter = {r.exporter: r for r in read_records(from_pairs) if r.model == "not_under_export"}
    assert by_exporter["dynamo"].status == "export_failed"
    alone = by_exporter["torchscript"]
    assert alone.status == "ok" and alone.exporter_speed is None
    assert alone.ort.timed_in == "alone" and alone.ort.latency and alone.ort.latency.n >= 10
    assert alone.speedup is not None
    assert not (from_pairs / LEDGER).exists()

"""The graph store keeps a graph whose weights are external data by linking or copying its
files, never loading them (a real-size model's weights are gigabytes, and its cell still
holds the model): the entry runs in a real onnxruntime as the exported graph does, and a
graph that names a data file outside its folder is left out, never the cell's result."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from harness.cell.graph_store import keep_graph
from harness.store.graphs import INPUTS, MODEL, stored_model
from harness.store.measures import ExportMeasures, Measurements
from harness.store.records import Cell, CellTask, Record

WEIGHT = np.arange(12, dtype=np.float32).reshape(3, 4)


def _export(folder: Path, location: str) -> Path:
    """A MatMul whose weight is external data in `location` (as the exporters write a
    model over 2 GB)."""
    folder.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(WEIGHT, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    path = folder / "exported.onnx"
    onnx.save_model(model, str(path), save_as_external_data=True, location="weights.bin",
                    size_threshold=0)  # fmt: skip
    saved = onnx.load(str(path), load_external_data=False)
    for entry in saved.graph.initializer[0].external_data:
        if entry.key == "location":  # onnx refuses to write a name out of the folder
            entry.value = location
    (folder / "weights.bin").rename(folder / location)
    path.write_bytes(saved.SerializeToString())
    return path


def _keep(tmp_path: Path, path: Path) -> tuple[Measurements, Path]:
    run_dir = tmp_path / "run"
    task = CellTask(Cell("m", "dynamo", 18), "zoo.py", "r", str(run_dir), graph_store=str(run_dir / "graphs"))  # fmt: skip
    m = Measurements(export=ExportMeasures(graph_fingerprint="f" * 64))
    keep_graph(task, path, {"x": np.ones((2, 3), np.float32)}, m)
    return m, run_dir


def test_a_graph_with_external_data_is_kept_with_its_files_and_runs(tmp_path: Path) -> None:
    path = _export(tmp_path / "cell", "exported.onnx.data")
    m, run_dir = _keep(tmp_path, path)
    kept = stored_model(run_dir, Record.finished(Cell("m", "dynamo", 18), "r", m))
    assert kept is not None and kept.name == MODEL
    data = kept.parent / "exported.onnx.data"
    assert data.samefile(path.parent / "exported.onnx.data")  # linked, not loaded and saved
    inputs = dict(np.load(kept.parent / INPUTS))
    (y,) = ort.InferenceSession(str(kept)).run(None, inputs)
    np.testing.assert_array_equal(y, inputs["x"] @ WEIGHT)


@pytest.mark.parametrize("location", ["../elsewhere.bin", MODEL])
def test_a_graph_naming_data_outside_its_entry_is_left_out(tmp_path: Path, location: str) -> None:
    path = _export(tmp_path / "deep" / "cell", location)
    m, run_dir = _keep(tmp_path, path)
    assert "graph" not in m.artifacts
    assert not any((run_dir / "graphs").rglob(MODEL))

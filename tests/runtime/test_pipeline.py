"""The per-cell pipeline (harness/runtime/pipeline.py) is the one both kinds of cell run: a
sampled cell gets its export-time patch, its ORT session on the cell's device and the
same numerics failure text and signature as a whole-model cell. Real exports and a real
onnxruntime; the patch is a test patch registered for the test (tests/zoo_fixtures/
pipeline/sin_to_cos.py: torch.sin becomes torch.cos while it is applied)."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest
import torch

from harness.cell.ort import CudaProviderMissing
from harness.cell.stages import StageFailure
from harness.exporters import patches
from harness.runtime import pipeline, worker
from harness.runtime.samples import run_sampled
from harness.runtime.worker import run_cell
from harness.store.records import Cell, CellTask, Measurements, Record
from harness.store.status import Stage, Status
from tests.conftest import FIXTURES

SOURCE = FIXTURES / "pipeline" / "models.py"
SIN_TO_COS = "sin-to-cos"
WHOLE, SAMPLED = "sine", "sine_sampled"


@pytest.fixture
def sin_to_cos(monkeypatch: pytest.MonkeyPatch) -> str:
    patch = patches.Patch(
        SIN_TO_COS,
        "torch.sin is torch.cos (a test patch)",
        "tests.zoo_fixtures.pipeline.sin_to_cos",
    )
    monkeypatch.setitem(patches.REGISTRY, SIN_TO_COS, patch)
    return SIN_TO_COS


def _task(tmp_path: Path, model: str, patch: str = "none", device: str = "cpu") -> CellTask:
    family = "opinfo" if model == SAMPLED else "seed"
    cell = Cell(model, "torchscript", 18, device=device, family=family, patch=patch)
    return CellTask(cell, str(SOURCE), "t", str(tmp_path / model))


def test_without_a_patch_both_kinds_of_cell_export_the_model_as_it_is(tmp_path: Path) -> None:
    for model in (WHOLE, SAMPLED):
        r = run_cell(_task(tmp_path, model))
        assert r.status is Status.OK, (model, r.error_message)
        assert r.export.onnx_ops and "Sin" in r.export.onnx_ops and "Cos" not in r.export.onnx_ops


def test_a_sampled_cell_exports_with_its_patch_as_a_whole_model_cell_does(
    tmp_path: Path, sin_to_cos: str
) -> None:
    whole = run_cell(_task(tmp_path, WHOLE, sin_to_cos))
    sampled = run_cell(_task(tmp_path, SAMPLED, sin_to_cos))
    for r in (whole, sampled):
        assert r.cell.patch == sin_to_cos
        # The graph has the patched call; eager (unpatched) does not agree with it.
        assert r.export.onnx_ops and "Cos" in r.export.onnx_ops and "Sin" not in r.export.onnx_ops
        assert (r.status, r.stage) == (Status.NUMERICS_MISMATCH, Stage.NUMERICS), r.error_message
    assert sampled.samples is not None
    assert (sampled.samples.exported, sampled.samples.wrong) == (2, 2)
    # Undone after each export: eager and a plain cell see torch.sin again.
    assert float(torch.sin(torch.tensor(0.0))) == 0.0


def test_the_same_numerics_failure_has_one_text_and_signature_on_both_paths(
    tmp_path: Path, sin_to_cos: str
) -> None:
    whole = run_cell(_task(tmp_path, WHOLE, sin_to_cos))
    sampled = run_cell(_task(tmp_path, SAMPLED, sin_to_cos))
    assert whole.error_type == sampled.error_type == "NumericsMismatch"
    expected = "NumericsMismatch: N of N outputs differ: values beyond tolerance"
    assert whole.error_signature == sampled.error_signature == expected
    first = [(r.error_message or "").splitlines()[0] for r in (whole, sampled)]
    assert first == ["1 of 1 outputs differ: values beyond tolerance"] * 2
    # The record's listing of the failing samples carries the same signature.
    assert sampled.samples is not None
    assert {f.error_signature for f in sampled.samples.failures} == {expected}
    # Each differing output is named on a line of its own, after the signature's line.
    assert (whole.error_message or "").splitlines()[1].startswith("output_0: max_abs ")
    assert (sampled.error_message or "").splitlines()[1].startswith("sample0.output_0: max_abs ")


def test_a_sampled_cells_ort_session_is_on_the_cells_device(tmp_path: Path) -> None:
    """No GPU exists where these tests run (and this onnxruntime is a CPU build): a CUDA
    cell's runner asks ORT for the CUDA provider, gets a CPU session and refuses it,
    sample by sample, as a whole-model cell's runner does. A sampled cell that ran ORT on
    the CPU instead would pass here."""
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider: the refusal cannot be seen")
    task = _task(tmp_path, SAMPLED, device="cuda")
    spec = worker.find_spec(str(SOURCE), SAMPLED)
    r = run_sampled(task, spec, Measurements())
    assert (r.status, r.stage, r.error_type) == (
        Status.ORT_LOAD_FAILED,
        Stage.ORT_SESSION,
        "CudaProviderMissing",
    )
    assert "the ORT session got ['CPUExecutionProvider'], not CUDA" in (r.error_message or "")
    assert r.samples is not None and (r.samples.exported, r.samples.failed) == (2, 2)
    cpu = run_sampled(_task(tmp_path, SAMPLED), spec, Measurements())
    assert cpu.status is Status.OK, cpu.error_message


def test_both_kinds_of_cell_fail_a_cuda_cell_before_exporting_where_ort_has_no_cuda(
    tmp_path: Path,
) -> None:
    """The pre-export check (torch may see a GPU where onnxruntime has no CUDA provider;
    here neither does, so the stage is called as run_cell calls it past its skip)."""
    if "CUDAExecutionProvider" in ort.get_available_providers():
        pytest.skip("this onnxruntime has the CUDA provider")
    failures: list[StageFailure] = []
    for model in (WHOLE, SAMPLED):
        task = _task(tmp_path, model, device="cuda")
        m = Measurements()
        with pytest.raises(StageFailure) as raised:
            worker._run_spec(task, worker.find_spec(str(SOURCE), model), m)
        assert m.export.seconds is None, "failed before the export"
        failures.append(raised.value)
        record: Record = pipeline.failed(task, m, raised.value)
        assert (record.status, record.stage) == (Status.ORT_LOAD_FAILED, Stage.ORT_SESSION)
    assert [type(f.error) for f in failures] == [CudaProviderMissing] * 2
    assert str(failures[0].error) == str(failures[1].error)

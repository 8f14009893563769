"""A failed dynamo cell's markdown report (harness/exporters/dynamo_report.py) is the
report `torch.onnx.export(..., dynamo=True, report=True)` writes for the same failure,
file name and text, while the model is exported once, not twice."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from harness import exporters
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.exporters import dynamo_report
from harness.exporters.request import ExportRequest


class _DataDependent(torch.nn.Module):
    """Fails in capture: a branch on a value only known when it runs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.nonzero().shape[0] == 1:
            return x * 2
        return x


@pytest.fixture(scope="module")
def untranslatable() -> Iterator[torch.nn.Module]:
    """Fails in translation: a custom op the exporter has no ONNX function for."""
    with torch.library._scoped_library("harness_report_test", "FRAGMENT") as lib:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CPU")
        lib._register_fake("twice", torch.empty_like)

        class Untranslatable(torch.nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return torch.ops.harness_report_test.twice(x) + 1

        yield Untranslatable()


def _request(model: torch.nn.Module, tmp_path: Path, folder: str) -> ExportRequest:
    inputs = Inputs((torch.ones(4),), {})
    return ExportRequest(model, inputs, 18, tmp_path / "m.onnx", artifacts=tmp_path / folder)


def _cell_report(model: torch.nn.Module, tmp_path: Path) -> Path:
    """The cell's failed export, then its failure facts: the report it leaves."""
    dynamo = exporters.get("dynamo")
    request = _request(model, tmp_path, "cell")
    with pytest.raises(StageFailure) as failed:
        dynamo.export(request)
    dynamo.on_failure(request, failed.value)
    (report,) = (tmp_path / "cell").glob("*.md")
    return report


def _exporters_report(model: torch.nn.Module, tmp_path: Path) -> Path:
    """What the exporter itself writes when the same call asks for a report."""
    with pytest.raises(Exception):  # noqa: B017, PT011 - the export fails, as the cell's did
        dynamo_report.re_export(_request(model, tmp_path, "exporter"))
    (report,) = (tmp_path / "exporter").glob("*.md")
    return report


def _same_report(ours: Path, theirs: Path) -> None:
    stamp = re.compile(r"^onnx_export_[\d_-]+")
    assert stamp.sub("", ours.name) == stamp.sub("", theirs.name)
    address = re.compile(r"0x[0-9a-f]+")
    assert address.sub("0x", ours.read_text()) == address.sub("0x", theirs.read_text())


def test_a_capture_failure_report_is_the_exporters(tmp_path: Path) -> None:
    ours = _cell_report(_DataDependent(), tmp_path)
    assert ours.name.endswith("_pt_export.md")
    _same_report(ours, _exporters_report(_DataDependent(), tmp_path))


def test_a_translation_failure_report_is_the_exporters(
    untranslatable: torch.nn.Module, tmp_path: Path
) -> None:
    ours = _cell_report(untranslatable, tmp_path)
    assert ours.name.endswith("_conversion.md")
    assert "No ONNX function found" in ours.read_text()
    assert "phases.py" not in ours.read_text()  # the harness's timers are not the exporter's
    _same_report(ours, _exporters_report(untranslatable, tmp_path))


def test_a_decomposition_failure_report_is_the_exporters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No model here fails decomposition on its own, so the exporter's decomposition step
    # is made to fail (mocked), for the cell's call and the exporter's report=True call alike.
    from torch.onnx._internal.exporter import _core

    def failing(program: Any, **kwargs: Any) -> Any:
        raise RuntimeError("decomposition failed here")

    monkeypatch.setattr(_core, "_prepare_exported_program_for_export", failing)
    ours = _cell_report(torch.nn.ReLU(), tmp_path)
    assert "decomposition failed here" in ours.read_text()
    _same_report(ours, _exporters_report(torch.nn.ReLU(), tmp_path))


def test_a_failing_cell_exports_once(
    untranslatable: torch.nn.Module, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[bool] = []
    real = torch.onnx.export

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(bool(kwargs.get("report")))
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", counted)
    _cell_report(untranslatable, tmp_path)
    assert calls == [False]  # the user's call; the report came from its failure


def test_a_failure_no_export_observed_still_gets_the_exporters_report(
    tmp_path: Path,
) -> None:
    # e.g. a check of the cell's own that failed before the exporter's call was observed
    request = _request(_DataDependent(), tmp_path, "cell")
    exporters.get("dynamo").on_failure(request, RuntimeError("not from the exporter"))
    (report,) = (tmp_path / "cell").glob("*.md")
    assert report.name.endswith("_pt_export.md")

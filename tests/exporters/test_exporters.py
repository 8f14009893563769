"""The exporter registry: the one place each exporter's facts live, checked against the
installed torch."""

from __future__ import annotations

import pytest

from harness import exporters
from harness.exporters.request import ExporterAdapter

IMPLEMENTS = (
    "unavailable",
    "export",
    "aten_ops",
    "on_failure",
    "first_divergence",
    "mismatch_stage",
)


def test_opset_ranges_match_installed_torch() -> None:
    from torch.onnx import _constants

    for name in ("torchscript", "torchscript-script"):
        ts = exporters.get(name)
        assert (ts.min_opset, ts.max_opset) == (
            _constants.ONNX_MIN_OPSET,
            _constants.ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET,
        )
    assert exporters.get("dynamo").max_opset == _constants.ONNX_MAX_OPSET


@pytest.mark.parametrize("name", exporters.NAMES)
def test_every_exporter_implements_the_whole_interface(name: str) -> None:
    """mypy checks the signatures (harness/exporters/__init__.py); here, that each
    registry entry builds its adapter with its options and the adapter has every method."""
    adapter = exporters.get(name).adapter()
    assert isinstance(adapter, ExporterAdapter)
    assert all(callable(getattr(adapter, f, None)) for f in IMPLEMENTS)


def test_availability_is_asked_of_the_installed_torch() -> None:
    import torch

    legacy = exporters.get("dynamo-legacy").unavailable()
    assert (legacy is None) is hasattr(torch.onnx, "dynamo_export")
    assert legacy is None or "dynamo_export" in legacy
    assert exporters.get("dynamo").unavailable() is None


def test_opset_problems_and_unknown_names_are_sentences() -> None:
    assert exporters.get("torchscript").opset_problem(21) == (
        "opset 21 is outside what torchscript can take (7..20)"
    )
    assert exporters.get("dynamo").opset_problem(21) is None
    with pytest.raises(ValueError, match="unknown exporter 'onnx2' \\(known: dynamo, "):
        exporters.get("onnx2")

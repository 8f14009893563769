"""The values of two axes of the matrix that a cell names besides its model and exporter:
the floating dtype it runs at and how ONNX Runtime optimises its graph (harness.store.records'
`Cell`; docs/design.md, vocabulary)."""

from __future__ import annotations

from enum import StrEnum


class Dtype(StrEnum):
    """The floating dtype a cell casts the model and its floating inputs to (`--dtypes`);
    float32 is the zoo's own. `tolerance` is torch's `assert_close` default for the dtype,
    the export-fidelity gate of a reduced-precision cell (docs/design.md)."""

    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"

    @property
    def reduced(self) -> bool:
        return self is not Dtype.FLOAT32

    @property
    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol) of torch.testing.assert_close for this dtype."""
        return _ASSERT_CLOSE[self]


class OrtOpt(StrEnum):
    """How ONNX Runtime optimises the exported graph before the cell judges and times it
    (`--ort-opt`): `default`, a session as a user opens one (ORT's online optimisations at
    ORT_ENABLE_ALL, nothing written); `none`, the graph as exported (ORT_DISABLE_ALL);
    `all`, ORT_ENABLE_ALL written out (`optimized_model_filepath`) and that file judged;
    `fusions`, onnxruntime.transformers' optimizer (its fused transformer ops)."""

    DEFAULT = "default"
    NONE = "none"
    ALL = "all"
    FUSIONS = "fusions"


_ASSERT_CLOSE = {
    Dtype.FLOAT32: (1.3e-6, 1e-5),
    Dtype.FLOAT16: (1e-3, 1e-5),
    Dtype.BFLOAT16: (1.6e-2, 1e-5),
}

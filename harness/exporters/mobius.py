"""mobius (`mobius build`, the `mobius-onnx` package): graphs written with onnxscript's
`nn` modules from a checkpoint folder, 130-odd transformers model types. `--ep cpu` gives
the graph ONNX Runtime GenAI runs (GroupQueryAttention, SkipSimplifiedLayerNormalization;
`--runtime ort-genai` writes its `genai_config.json`); judged like any graph, and generated
with onnxruntime_genai's `Generator` too where it is installed (harness.cell.genai).

The command line (`--config DIR`), as a user of a local checkpoint types it: it reads
config.json through mobius's generic architecture config, where `mobius.build(DIR)`
resolves the model type's own (they disagree on Gemma 2: the command crashes on
`query_pre_attn_scalar`)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.exporters.builder import BuilderAdapter, Program, python
from harness.store.axes import Dtype

NAME = "mobius"


def command(checkpoint: Path, out: Path, precision: str, device: str) -> list[str]:
    return [
        *python(), "-m", "mobius", "build", "--config", str(checkpoint),
        "--ep", device, "--dtype", precision, "--runtime", "ort-genai", str(out),
    ]  # fmt: skip


PROGRAM = Program(
    name=NAME,
    title="mobius",
    module="mobius",
    requirement="mobius-onnx>=0.1",
    command=command,
    unsupported=(
        re.compile(r"Unknown model_type '[^']*'\."),
        re.compile(r"argument --dtype: invalid choice: .*"),
        re.compile(r"Unknown execution provider '[^']*'"),
    ),
    precisions={Dtype.FLOAT32: "f32", Dtype.FLOAT16: "f16", Dtype.BFLOAT16: "bf16"},
)


class Adapter(BuilderAdapter):
    """The exporter adapter (harness.exporters.ExporterAdapter)."""

    program = PROGRAM

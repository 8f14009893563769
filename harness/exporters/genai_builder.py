"""onnxruntime-genai's model builder (`python -m onnxruntime_genai.models.builder`), what
ONNX Runtime GenAI serves: a decoder's graph with ORT's fused ops (GroupQueryAttention,
SkipSimplifiedLayerNormalization), its weights and `genai_config.json`, from a checkpoint
folder. Run as `builder.py` runs a builder; judged like any graph, and generated with
onnxruntime_genai's `Generator` too (harness.cell.genai)."""

from __future__ import annotations

import re
from pathlib import Path

from harness.exporters.builder import BuilderAdapter, Program, python
from harness.store.axes import Dtype

NAME = "genai-builder"
# The builder prints the combinations it builds (and builds others without a word: fp16
# and bf16 for the CPU exit 0 with a graph whose decode step fails in ORT).
_VALID = re.compile(r"Valid precision \+ execution provider combinations are: (.*)")


def command(checkpoint: Path, out: Path, precision: str, device: str) -> list[str]:
    """The builder's command line; `-c` keeps its download cache out of the working
    directory (the default is ./cache_dir)."""
    cache = checkpoint / "cache"
    return [
        *python(), "-m", "onnxruntime_genai.models.builder",
        "-i", str(checkpoint), "-o", str(out), "-p", precision, "-e", device, "-c", str(cache),
    ]  # fmt: skip


def invalid(log: str, precision: str, device: str) -> str | None:
    """Where the builder's own list of valid combinations lacks this one: its line."""
    found = _VALID.search(log)
    if found is None:
        return None
    valid = {c.strip().upper() for c in found.group(1).split(",")}
    if f"{precision} {device}".upper() in valid:
        return None
    return f"{precision} on {device} is not among its {found.group(0).strip()}"


PROGRAM = Program(
    name=NAME,
    title="the genai builder",
    module="onnxruntime_genai",
    requirement="onnxruntime-genai>=0.18",
    command=command,
    unsupported=(
        re.compile(r"NotImplementedError: The .* model is not currently supported\."),
        re.compile(r"argument -p/--precision: invalid choice: .*"),
        re.compile(r"argument -e/--execution_provider: invalid choice: .*"),
    ),
    precisions={Dtype.FLOAT32: "fp32", Dtype.FLOAT16: "fp16", Dtype.BFLOAT16: "bf16"},
    invalid=invalid,
)


class Adapter(BuilderAdapter):
    """The exporter adapter (harness.exporters.ExporterAdapter)."""

    program = PROGRAM

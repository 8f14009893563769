"""ONNX Runtime's model builders as exporters: programs that write a decoder's graph from
a checkpoint folder instead of tracing the model (onnxruntime-genai's builder,
`genai_builder.py`; mobius, `mobius.py`). The cell saves its model with `save_pretrained`
(`checkpoint.py`), runs the builder's command as a user types it, at the cell's precision
and for its device, in a subprocess (`builder_run.py`), and judges the graph it writes like
any exported graph. The graph holds ORT's own ops (GroupQueryAttention, ...): it is run in
ORT, not given to onnx.checker, and those ops are the record's `ort_fused_ops`.

A builder that is not installed, an architecture or precision it refuses: the cell is
skipped with the reason (the builder's own words where it said why). One that crashes,
hangs or writes no graph: a record with the status and the builder's last lines.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.exporters import builder_run, checkpoint
from harness.exporters.hf import INSTALL, pretrained
from harness.exporters.request import Exported, ExportRequest, Opaque, ProgramFailed, Refused
from harness.store.axes import Dtype

CHECKPOINT = "checkpoint"  # the folder beside the graph the model is saved into
LOG = "build.log"  # the builder's output, in the checkpoint folder (not counted as graph)
GENAI_CONFIG = "genai_config.json"


@dataclass(frozen=True)
class Program:
    """One builder as a user runs it: its name in the registry and in reasons, the module
    `python -m` runs (found, never imported here), the pip requirement, the command for a
    checkpoint folder, output folder, precision and device, the lines in which it refuses
    an architecture or a precision (each a skip), and the precision a dtype asks of it."""

    name: str
    title: str
    module: str
    requirement: str
    command: Callable[[Path, Path, str, str], list[str]]
    unsupported: tuple[re.Pattern[str], ...]
    precisions: dict[Dtype, str]
    # A precision the builder built but says it does not build for the device (its own
    # line), found in its whole log; None: it refuses what it cannot build.
    invalid: Callable[[str, str, str], str | None] = lambda log, precision, device: None


def python() -> list[str]:
    """The interpreter of this environment, without the working directory on `sys.path`
    (`-P`: a module there named like one of the builder's own would shadow it)."""
    return [sys.executable, "-P"]


class BuilderAdapter(Opaque):
    """The exporter adapter of a model builder (harness.exporters.ExporterAdapter)."""

    program: Program

    def __init__(self) -> None:
        self.name, self.call = self.program.name, self.program.title

    def unavailable(self) -> str | None:
        """Why the builder cannot run here: it is not installed, or transformers (which
        saves the checkpoint it reads) is not."""
        if not _installed(self.program.module):
            return (
                f"{self.program.title} is not installed: pip install '{self.program.requirement}'"
            )
        if not _installed("transformers"):
            return f"{self.call} reads a transformers checkpoint: transformers is not installed: {INSTALL}"
        return None

    def refuses(self, model: torch.nn.Module) -> str | None:
        """A builder reads a transformers checkpoint of a decoder that generates."""
        lm = pretrained(model)
        if lm is None:
            return (
                f"{self.call} builds from a transformers checkpoint, not a {type(model).__name__}"
            )
        if not lm.can_generate():
            return f"{self.call} builds models that generate; {type(lm).__name__} does not"
        if getattr(lm.config, "is_encoder_decoder", False):
            return (
                f"{self.call}'s encoder-decoder graphs are not judged here (a decoder-only step is)"
            )
        return None

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        return None  # never warmed up: each build is a process of its own (in_process=False)

    def export(self, request: ExportRequest) -> Exported:
        """`save_pretrained` into a checkpoint folder, then the builder's command writing
        the graph where the cell expects it."""
        lm = pretrained(request.model)
        assert lm is not None  # the worker skipped the others (refuses)
        if request.dynamic_shapes is None:
            raise Refused(
                f"{self.call} writes a graph of any batch and length: it runs in dynamic cells"
            )
        folder = request.path.parent
        saved = folder / CHECKPOINT
        save_s = checkpoint.save(lm, saved)
        precision = self.precision(request.dtype)
        command = self.program.command(saved, folder, precision, request.device)
        threads = {"OMP_NUM_THREADS": str(torch.get_num_threads())}
        run = builder_run.run(
            command, cwd=folder, log=saved / LOG, timeout_s=request.timeout_s, env=threads
        )
        self._judge(run, request, saved, precision)
        genai = folder if (folder / GENAI_CONFIG).is_file() else None
        phases: dict[str, float | None] = {"checkpoint": save_s, "build": run.seconds}
        return Exported(
            request.path,
            phases,
            seconds=save_s + run.seconds,
            notes=[" ".join(command[1:])],
            fused_at_export=True,
            program_peak_rss_mb=run.peak_rss_mb,
            genai_folder=genai,
            from_checkpoint=True,
        )

    def precision(self, dtype: Dtype) -> str:
        found = self.program.precisions.get(dtype)
        if found is None:
            raise Refused(f"{self.call} has no precision for {dtype}")
        return found

    def _judge(
        self, run: builder_run.Run, request: ExportRequest, saved: Path, precision: str
    ) -> None:
        """The run's outcome: a skip with the builder's reason, a failure with its status
        and last lines, or a graph to judge."""
        found = builder_run.outcome(
            run,
            graph_written=request.path.is_file(),
            unsupported=self.program.unsupported,
            limit_s=request.timeout_s,
        )
        named = _architecture(saved)
        if found.skip is not None:
            raise Refused(f"{self.call}: {found.skip.replace(str(saved), named)}")
        if not found.built:
            assert found.status is not None
            message = found.message.replace(str(saved), named)
            raise StageFailure("translate", ProgramFailed(message, found.status))
        log = (saved / LOG).read_text(errors="replace")
        if why := self.program.invalid(log, precision, request.device):
            raise Refused(f"{self.call}: {why}")


def _installed(module: str) -> bool:
    """Whether `module` can be found (not imported: the genai builder's import changes
    `sys.path`)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _architecture(saved: Path) -> str:
    """The checkpoint's architecture (`LlamaForCausalLM`), which names the model in the
    builder's messages instead of the cell's temporary folder."""
    import json

    try:
        found = json.loads((saved / "config.json").read_text()).get("architectures") or []
    except (OSError, ValueError):
        found = []
    return str(found[0]) if found else "saved"

"""The ORT optimisation axis in a cell (`--ort-opt`, docs/design.md): the graph a cell's
session judges and times for its `OrtOpt`, the fused ops it gained and the optimizers that
changed it, and the search for the optimizer that broke the numbers.

- `default`: the exported graph in a session at ORT_ENABLE_ALL, as a user opens one.
- `none`: the exported graph at ORT_DISABLE_ALL.
- `all`: ORT_ENABLE_ALL written out (`optimized_model_filepath`), and that file loaded with
  nothing more done to it: what ORT's offline optimisation ships.
- `fusions`: onnxruntime.transformers' optimizer (its Python fusions into ORT's contrib
  ops: SkipLayerNormalization, Attention, ...), then a default session.

Which of ORT's graph transformers changed a graph is what ORT logs at INFO level while it
builds a session ("GraphTransformer X modified: 1"): the log is read from the process's
stderr, captured around the session's creation.
"""

from __future__ import annotations

import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import onnx
import onnxruntime as ort

from harness.cell.ort import Optimisation, session_options, session_settings
from harness.cell.stages import stage
from harness.store.records import OrtOpt

SEARCH_BUDGET_S = 60.0  # the optimizer search of one cell stops after this long


class FusionFailed(RuntimeError):
    """onnxruntime.transformers' optimizer raised on the exported graph (`ort_session`)."""


@dataclass(frozen=True)
class Prepared:
    """The graph a cell's session loads, how, and what the optimisation did to it."""

    path: Path
    optimisation: Optimisation
    fused_ops: dict[str, int] | None = None
    optimizers: list[str] | None = None


def prepare(ort_opt: OrtOpt, exported: Path, model_type: str = "bert") -> Prepared:
    """The graph and session for `ort_opt`; the optimised graph is written beside `exported`."""
    if ort_opt is OrtOpt.DEFAULT:
        return Prepared(exported, Optimisation("all"))
    if ort_opt is OrtOpt.NONE:
        return Prepared(exported, Optimisation("none"), {}, [])
    with stage("ort_session"):
        if ort_opt is OrtOpt.ALL:
            written = exported.with_name("ort_optimized.onnx")
            changed = changed_by(exported, Optimisation("all", written_to=written))
            return Prepared(written, Optimisation("none"), fused_ops(exported, written), changed)
        fused = exported.with_name("ort_fused.onnx")
        try:
            flags = fuse(exported, fused, model_type)
        except Exception as exc:  # the optimizer's own failure, named as such
            problem = f"onnxruntime.transformers' optimizer failed on this graph: {exc!r}"
            raise FusionFailed(problem) from exc
        return Prepared(fused, Optimisation("all"), fused_ops(exported, fused), flags)


def fused_at_export(exported: Path) -> Prepared:
    """A graph the exporter fused for ORT itself (transformers' `ort_fusions`): a default
    session, its contrib ops as the fused ones, the exporter's fusions as the optimizer."""
    return Prepared(exported, Optimisation("all"), contrib_ops([exported]), ["exporter"])


def contrib_ops(paths: Iterable[Path]) -> dict[str, int]:
    """The op types of ORT's own domain (com.microsoft) in these graphs, with their counts."""
    found: Counter[str] = Counter()
    for path in paths:
        graph = onnx.load(str(path), load_external_data=False).graph
        found.update(n.op_type for n in graph.node if n.domain == "com.microsoft")
    return dict(sorted(found.items()))


def fused_ops(exported: Path, optimised: Path) -> dict[str, int]:
    """The op types of the optimised graph that the exported one lacks, with their counts."""
    before = _op_types(exported)
    return {op: n for op, n in sorted(_op_types(optimised).items()) if op not in before}


def _op_types(path: Path) -> Counter[str]:
    graph = onnx.load(str(path), load_external_data=False).graph
    return Counter(n.op_type for n in graph.node)


_MODIFIED = re.compile(r"GraphTransformer (\w+) modified: 1")


def changed_by(path: Path, optimisation: Optimisation) -> list[str]:
    """ORT's graph transformers that changed the graph while a session at `optimisation`
    loaded it, in the order they ran (ORT's INFO log, read from stderr)."""
    options = session_options(session_settings(1), optimisation)
    options.log_severity_level = 1  # INFO: where ORT says which transformer changed the graph
    with _stderr_captured() as log:
        ort.InferenceSession(
            str(path),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=optimisation.disabled,
        )
    return list(dict.fromkeys(_MODIFIED.findall(log.read())))


class _Log:
    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile()  # noqa: SIM115 - ORT writes to it until closed

    def read(self) -> str:
        self.file.seek(0)
        return self.file.read().decode(errors="replace")


@contextmanager
def _stderr_captured() -> Iterator[_Log]:
    """The process's file descriptor 2 (where ORT's C++ logger writes) into a file."""
    log, saved = _Log(), os.dup(2)
    os.dup2(log.file.fileno(), 2)
    try:
        yield log
    finally:
        os.dup2(saved, 2)
        os.close(saved)


FUSION_FLAGS = (
    "enable_gelu",
    "enable_layer_norm",
    "enable_attention",
    "enable_rotary_embeddings",
    "enable_skip_layer_norm",
    "enable_embed_layer_norm",
    "enable_bias_skip_layer_norm",
    "enable_bias_gelu",
)


def fuse(exported: Path, out: Path, model_type: str, without: str | None = None) -> list[str]:
    """onnxruntime.transformers' fusions of `exported` into `out` (its Python fusions only:
    the session adds ORT's own); `without` leaves one fusion out. Returns the fusions on."""
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions(model_type)
    if without is not None:
        setattr(options, without, False)
    fused = optimize_model(
        str(exported), model_type, optimization_options=options, opt_level=0, use_gpu=False
    )
    fused.save_model_to_file(str(out))
    return [flag for flag in FUSION_FLAGS if getattr(options, flag)]


Passes = Callable[[Path, Optimisation], bool]


def culprit(
    ort_opt: OrtOpt, exported: Path, passes: Passes, model_type: str = "bert"
) -> str | None:
    """The optimizer whose removal alone gives eager's numbers again, where the graph as
    exported gives them and the optimised one does not: one of ORT's graph transformers
    (`disabled_optimizers`) or one of the transformers optimizer's fusions (`without`).
    None where the exported graph fails too (not ORT's doing), where no one optimizer
    restores the numbers, or past `SEARCH_BUDGET_S`."""
    if ort_opt is OrtOpt.NONE or not passes(exported, Optimisation("none")):
        return None
    deadline = time.monotonic() + SEARCH_BUDGET_S
    for name, path, optimisation in _without_each(ort_opt, exported, model_type):
        if passes(path, optimisation):
            return name
        if time.monotonic() > deadline:
            return None
    return None


def _without_each(
    ort_opt: OrtOpt, exported: Path, model_type: str
) -> Iterator[tuple[str, Path, Optimisation]]:
    """Each optimizer `ort_opt` ran, with the graph and session that leave it out alone."""
    if ort_opt is OrtOpt.FUSIONS:
        candidate = exported.with_name("ort_fused_search.onnx")
        for flag in FUSION_FLAGS:
            fuse(exported, candidate, model_type, without=flag)
            yield flag, candidate, Optimisation("all")
        return
    for name in changed_by(exported, Optimisation("all")):
        yield name, exported, Optimisation("all", disabled=(name,))

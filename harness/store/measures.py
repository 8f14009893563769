"""What a cell measured, in the groups a `Record` holds: the export (`ExportMeasures`), the
ONNX Runtime session (`OrtMeasures`), eager PyTorch (`EagerMeasures`) and the output
checks (`Numerics`). The worker fills a `Measurements` group by group, stage by stage.

Each group maps itself to and from the flat field names of `records.jsonl` (the contract in
docs/design.md: `export_s`, `ort_latency_ms`, ...): `to_flat` and `from_flat`. The field
types are the declaration: pydantic derives the validator and the reader from them
(harness.store.declare), with `FLAT` naming each field's key in the line.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Self

from pydantic import GetCoreSchemaHandler
from pydantic_core import core_schema as cs

from harness.store.declare import (
    Count,
    Error,
    Fraction,
    MiB,
    Millis,
    NullIsEmpty,
    Ratio,
    Seconds,
    Spread,
    read,
)
from harness.store.details import (
    Divergence,
    JsonObject,
    MismatchStage,
    OrtRuntime,
    SampleSummary,
    plain,
)


@dataclass(frozen=True)
class Latency:
    """Raw latency samples in milliseconds and the statistics derived from them."""

    samples: Annotated[tuple[Millis, ...], NullIsEmpty()]
    p50: Millis
    # None where the samples are too few to say it (harness.stats.PERCENTILE_MIN_SAMPLES:
    # 10 for p90, 100 for p99); a record before that rule holds it anyway
    p90: Millis | None
    p99: Millis | None
    mean: Millis
    stdev: Spread
    n: Count
    # The median's distribution-free 95% confidence interval; None below 6 samples
    ci_low: Millis | None = None
    ci_high: Millis | None = None
    # The interquartile band (the trends draw it; the history keeps it without the
    # samples); None in records written before it was.
    p25: Millis | None = None
    p75: Millis | None = None

    @classmethod
    def from_samples(cls, samples_ms: list[float] | tuple[float, ...]) -> Latency:
        from harness.stats import summarize

        s = summarize(samples_ms)
        return cls(
            tuple(samples_ms), s.p50, s.p90, s.p99, s.mean, s.stdev, s.n,
            s.ci_low, s.ci_high, s.p25, s.p75,
        )  # fmt: skip

    @property
    def interval(self) -> float | None:
        """The median interval's half-width relative to the median (0.02: +-2%)."""
        if self.ci_low is None or self.ci_high is None or self.p50 <= 0:
            return None
        return (self.ci_high - self.ci_low) / 2 / self.p50

    def quartile(self, q: int) -> float | None:
        """The 25th or 75th percentile: of the samples where they are kept, else as stored."""
        if self.samples:
            from harness.stats import percentile

            return percentile(self.samples, q)
        return {25: self.p25, 75: self.p75}[q]

    @classmethod
    def from_dict(cls, d: JsonObject) -> Latency:
        return read(cls, d)  # type: ignore[no-any-return]

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        """Pydantic's schema of the dataclass; `samples` left out reads as empty."""
        return cs.no_info_before_validator_function(
            lambda d: {"samples": None, **d} if isinstance(d, dict) else d, handler(source)
        )

    def to_dict(self) -> JsonObject:
        return {f.name: getattr(self, f.name) for f in _LATENCY_FIELDS} | {
            "samples": list(self.samples)
        }


_LATENCY_FIELDS = dataclasses.fields(Latency)


def speedup_of(eager: Latency | None, ort: Latency | None) -> float | None:
    """Eager p50 / ORT p50: above 1, ORT is faster."""
    if eager is None or ort is None or ort.p50 <= 0:
        return None
    return eager.p50 / ort.p50


def over_weights(peak_mb: float | None, weights_mb: float | None) -> float | None:
    """An export's peak memory over the model's weights: 'exporting X needs N x its size'."""
    if peak_mb is None or not weights_mb:
        return None
    return peak_mb / weights_mb


@dataclass(frozen=True)
class ShapeLatency:
    """A cell timed at one named shape (a decode step, a prefill): the sizes of its dynamic
    dimensions, ORT's and eager's latency there, and eager p50 / ORT p50."""

    sizes: dict[str, Count] | None
    ort_latency_ms: Latency
    eager_latency_ms: Latency
    speedup: Ratio | None
    # The cell whose loop timed eager here (the protocol's share_eager: another exporter's
    # cell of the model, at the same shape and threads); None: this cell, interleaved with ORT
    eager_from: str | None = None

    @classmethod
    def of(
        cls,
        sizes: dict[str, int] | None,
        ort_ms: list[float],
        eager_ms: list[float],
        eager_from: str | None = None,
    ) -> Self:
        ort, eager = Latency.from_samples(ort_ms), Latency.from_samples(eager_ms)
        return cls(sizes, ort, eager, speedup_of(eager, ort), eager_from)

    @classmethod
    def from_dict(cls, d: JsonObject) -> ShapeLatency:
        return read(cls, d)  # type: ignore[no-any-return]

    def to_dict(self) -> JsonObject:
        return {
            "sizes": self.sizes,
            "ort_latency_ms": self.ort_latency_ms.to_dict(),
            "eager_latency_ms": self.eager_latency_ms.to_dict(),
            "speedup": self.speedup,
            **({"eager_from": self.eager_from} if self.eager_from is not None else {}),
        }


@dataclass(frozen=True)
class OutputCheck:
    """How one ONNX output compares with the eager reference."""

    name: str
    max_abs: Error | None
    max_rel: Error | None
    rmse: Error | None
    rtol: Error
    atol: Error
    ok: bool
    note: str | None = None
    # Elements that fail the gate (integers: unequal; floats: beyond tolerance and eager's
    # noise, or NaN/inf where eager has none); None in records older than schema 2.
    mismatches: Count | None = None
    # mismatches / elements; a reduced-precision cell's output passes up to 1% (None:
    # records older than schema 5, or an output with no elements).
    mismatch_fraction: Fraction | None = None

    @classmethod
    def from_dict(cls, d: JsonObject) -> OutputCheck:
        return read(cls, d)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class PrecisionLoss:
    """A reduced-precision cell's outputs against the float32 model's: eager's at the
    cell's dtype and ORT's, each by the dtype's tolerance. Eager losing as much as ORT says
    the model is not safe at the dtype; ORT losing more says the export (or the runtime)
    is where the precision went."""

    eager: list[OutputCheck]
    ort: list[OutputCheck]

    def worse(self) -> str | None:
        """Which side lost precision beyond the dtype's tolerance: 'eager', 'ort', 'both'."""
        eager = not all(c.ok for c in self.eager)
        ort = not all(c.ok for c in self.ort)
        return {(True, True): "both", (True, False): "eager", (False, True): "ort"}.get(
            (eager, ort)
        )


# -- the groups ---------------------------------------------------------------------------------


class Group:
    """A group of the record's measurements. `FLAT` names each field's key in the flat line
    of `records.jsonl` (the contract); the field's type says what the key holds."""

    FLAT: ClassVar[Mapping[str, str]] = {}  # key in the line -> field

    @classmethod
    def from_flat(cls, d: JsonObject) -> Self:
        return read(cls, {name: d.get(key) for key, name in cls.FLAT.items()})  # type: ignore[no-any-return]

    def to_flat(self) -> JsonObject:
        return {key: plain(getattr(self, name)) for key, name in self.FLAT.items()}


@dataclass(frozen=True)
class Generation:
    """Greedy generation of `new_tokens` tokens from a fixed prompt with the exported
    graph(s) run in ORT, against eager's greedy generation on the same model and prompt
    (harness.cell.generation): how many leading tokens agree, the first that differs, and
    ORT's largest logits error at each step up to it. A first difference where ORT's logits
    are within the cell's tolerance of eager's and eager's two best are closer than twice
    that error is a tie (`tie_gap`: eager's gap), not counted against the export."""

    new_tokens: Count
    agree: Count
    first_difference: Count | None  # 0-based, among the new tokens; None: all agree
    max_logits_abs: list[Error]  # per step, up to the first difference
    tie_gap: Error | None = None
    eager_tokens: list[Count] | None = None  # the new tokens each side picked
    ort_tokens: list[Count] | None = None
    # A batch of prompts (harness.cell.batched): their lengths, the padding the graph was
    # fed (`left` as a tokenizer pads for generation, `right` where the graph's attention
    # reads only each row's length), and the row the figures above are of (the first that
    # differs, else the first).
    lengths: list[Count] | None = None
    padding: str | None = None
    row: Count | None = None
    error: str | None = None  # the generation could not run: the first line of why

    @property
    def ok(self) -> bool:
        if self.error is not None:
            return False
        return self.first_difference is None or self.tie_gap is not None

    @classmethod
    def failed(cls, error: str, *, lengths: list[int] | None = None) -> Generation:
        """A generation that could not run (the runtime refused the graph or the batch)."""
        return cls(0, 0, None, [], lengths=lengths, error=error[:300])


@dataclass(frozen=True)
class ComponentCheck:
    """One component of a generative export (prefill, decode, an encoder) on the inputs
    transformers captured for it: its outputs against the eager submodule's, its latency."""

    checks: list[OutputCheck]
    ort_latency_ms: Latency | None = None
    eager_latency_ms: Latency | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


@dataclass(frozen=True)
class ExportMeasures(Group):
    """The export call and the graph it saved."""

    seconds: Seconds | None = None
    phases: dict[str, Seconds | None] | None = None  # capture, translate, ... -> seconds
    peak_rss_mb: MiB | None = None
    peak_cuda_mb: MiB | None = None
    aten_ops: dict[str, int] | None = None  # ATen overloads in the captured graph
    unsupported_ops: list[str] | None = None  # those the exporter found no translation for
    opset_actual: int | None = None  # from the saved model's opset_import
    onnx_bytes: int | None = None
    onnx_nodes: int | None = None
    onnx_ops: dict[str, int] | None = None  # op_type -> count
    # A canonical hash of the graph (harness/cell/fingerprint.py): equal on two cells with
    # the same runtime, they ran the same computation.
    graph_fingerprint: str | None = None
    # The model's parameters and buffers at the export (MiB): what the export's peak and
    # the graph's bytes are measured against, as users plan memory and disk.
    weights_mb: MiB | None = None
    # Initializers of the graph that hold the same values (a weight stored more than once,
    # such as a tied embedding saved twice): each group's names, and the bytes the copies
    # beyond the first take.
    duplicate_initializers: list[list[str]] | None = None
    duplicate_bytes: int | None = None

    FLAT: ClassVar[Mapping[str, str]] = {
        "opset_actual": "opset_actual",
        "export_s": "seconds",
        "export_phases": "phases",
        "export_peak_rss_mb": "peak_rss_mb",
        "export_peak_cuda_mb": "peak_cuda_mb",
        "onnx_bytes": "onnx_bytes",
        "onnx_nodes": "onnx_nodes",
        "onnx_ops": "onnx_ops",
        "aten_ops": "aten_ops",
        "unsupported_ops": "unsupported_ops",
        "graph_fingerprint": "graph_fingerprint",
        "weights_mb": "weights_mb",
        "duplicate_initializers": "duplicate_initializers",
        "duplicate_bytes": "duplicate_bytes",
    }

    @property
    def peak_over_weights(self) -> float | None:
        """The export's peak RSS over the model's weights."""
        return over_weights(self.peak_rss_mb, self.weights_mb)

    @property
    def peak_cuda_over_weights(self) -> float | None:
        """A CUDA cell's export peak on the device over the weights (None on the CPU)."""
        return over_weights(self.peak_cuda_mb, self.weights_mb)

    @property
    def graph_over_weights(self) -> float | None:
        """The saved graph's bytes over the model's weights (above 1: a weight stored twice,
        or constants folded into the graph)."""
        if self.onnx_bytes is None or not self.weights_mb:
            return None
        return self.onnx_bytes / (self.weights_mb * 1024**2)


@dataclass(frozen=True)
class OrtMeasures(Group):
    """The ONNX Runtime session: its creation time, the latency of the graph in it (at
    the first timed shape), and the runtime it was timed in."""

    session_s: Seconds | None = None
    latency: Latency | None = None
    runtime: OrtRuntime | None = None
    # Where `latency` was timed when not in the cell's own loop (the protocol's
    # ort_from_pairs): "pair", its graph's calls in the exporter pair; "alone", by itself
    # after its model's other exporters' cells failed
    timed_in: str | None = None
    # What the cell's ORT optimisation did (harness.cell.ort_opt): the op types of the
    # optimised graph that the exported one lacks, with their counts; the optimizers
    # (ORT's graph transformers, or the transformers optimizer's fusions) that changed the
    # graph; and, where the optimised graph fails numerics and the graph as exported
    # passes, the one whose removal restores the numbers.
    fused_ops: dict[str, Count] | None = None
    optimizers: list[str] | None = None
    broken_by: str | None = None
    # A CUDA cell's host<->device copy nodes in the graph its session runs, by op type
    # (harness.cell.ort.HOST_TRANSFERS); none on the CPU.
    host_transfers: dict[str, Count] | None = None

    FLAT: ClassVar[Mapping[str, str]] = {
        "ort_session_s": "session_s",
        "ort_latency_ms": "latency",
        "ort_runtime": "runtime",
        "ort_timed_in": "timed_in",
        "ort_fused_ops": "fused_ops",
        "ort_optimizers": "optimizers",
        "ort_broken_by": "broken_by",
        "ort_host_transfers": "host_transfers",
    }


@dataclass(frozen=True)
class EagerMeasures(Group):
    """Eager PyTorch, timed interleaved with ORT on the same inputs, or, with the protocol's
    share_eager, by another exporter's cell of the model (`timed_by`, its label)."""

    latency: Latency | None = None
    timed_by: str | None = None

    FLAT: ClassVar[Mapping[str, str]] = {
        "eager_latency_ms": "latency",
        "eager_timed_by": "timed_by",
    }


@dataclass(frozen=True)
class Numerics(Group):
    """The ONNX outputs against eager's, and on a mismatch, where it starts and which
    stage changed the numbers."""

    checks: list[OutputCheck] | None = None
    first_divergence: Divergence | None = None
    mismatch_stage: MismatchStage | None = None
    precision_loss: PrecisionLoss | None = None  # reduced-precision cells only
    # A generative export's components, each judged on its own (harness.runtime.components).
    components: dict[str, ComponentCheck] | None = None
    generation: Generation | None = None  # generative cells: tokens against eager's
    # The other ways the cell generated (harness.runtime.tokens): `batched` (a left-padded
    # batch of prompts of different lengths, the harness's loop), `genai` and
    # `genai-batched` (onnxruntime_genai's Generator, where the export wrote its config).
    generations: dict[str, Generation] | None = None

    FLAT: ClassVar[Mapping[str, str]] = {
        "numerics": "checks",
        "first_divergence": "first_divergence",
        "mismatch_stage": "mismatch_stage",
        "precision_loss": "precision_loss",
        "components": "components",
        "generation": "generation",
        "generations": "generations",
    }


@dataclass
class Measurements:
    """What a cell measured so far; the worker replaces its groups stage by stage.

    A failing stage keeps everything measured before it: a cell whose ORT run fails
    still reports its export time and memory.
    """

    export: ExportMeasures = field(default_factory=ExportMeasures)
    ort: OrtMeasures = field(default_factory=OrtMeasures)
    eager: EagerMeasures = field(default_factory=EagerMeasures)
    numerics: Numerics = field(default_factory=Numerics)
    artifacts: dict[str, str] = field(default_factory=dict)
    samples: SampleSummary | None = None  # a sampled cell (harness.runtime.samples)
    # A dynamic cell timed at named shapes (the entry's `latency_shapes`: a decode step, a
    # prefill): each one's sizes and latencies; the first is also the record's latency.
    shape_latency: dict[str, ShapeLatency] | None = None
    # ORT and eager at the protocol's other thread counts, by the count
    thread_latency: dict[str, ShapeLatency] | None = None

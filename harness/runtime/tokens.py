"""A one-graph generative cell's token checks (the decode suite's graphs, any exporter's):

- the single prompt through the harness's loop (harness.cell.generation): tokens that
  differ fail the cell at `numerics`;
- a batch of prompts of different lengths, padded as users send them (harness.cell.batched,
  `generations["batched"]`): a fact of the record;
- where the export wrote onnxruntime_genai's config (the model builders), the Generator on
  the single prompt (`genai`: tokens that differ fail the cell; a Generator that cannot run
  the folder is recorded, not failed) and on the batch (`genai-batched`, a fact).

An encoder-decoder step (harness.cell.encdec) generates from the source text: its encoder
exported with the cell's exporter too, then decoder steps through the cell's graph; where
the encoder does not export, the record says why and the cell is not failed for it.

Everything is measured before a failure is raised, so a failing cell keeps every figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from harness import exporters
from harness.cell import batched, dynamic, encdec, genai, generation
from harness.cell.numerics import DEFAULT_TOLERANCE, tolerance_at
from harness.cell.ort import OrtRunner
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, stage
from harness.exporters.request import Components, Exported, ExportRequest
from harness.store.axes import Dtype
from harness.store.error_text import first_line
from harness.store.measures import Generation, Measurements
from harness.zoo import ModelSpec

GENAI_MISSING = "onnxruntime_genai is not installed: pip install onnxruntime-genai"


class GeneratorTokensDiffer(Exception):
    """onnxruntime_genai's Generator generates other tokens than eager (numerics)."""


def reference(
    model: torch.nn.Module, how: Mapping[str, Any]
) -> tuple[torch.Tensor, generation.Greedy]:
    """The first new tokens and eager's greedy generation from them: the prompt (a
    decoder), or the decoder's start token after the source text (an encoder-decoder)."""
    if not how.get("encoder_decoder"):
        return generation.reference(model, how)
    lm = generation.language_model(model)
    with stage("reference"):
        ids = encdec.start(lm)
        return ids, generation.greedy(encdec.eager_step(lm, generation.prompt(lm)), ids)


def one_graph(
    runner: OrtRunner,
    model: torch.nn.Module,
    spec: ModelSpec,
    made: tuple[ExportRequest, Exported, str],
    tokens: tuple[torch.Tensor, generation.Greedy],
    how: Mapping[str, Any],
    dtype: Dtype,
    m: Measurements,
) -> None:
    """A one-graph cell's token checks: an encoder-decoder step's from its source text,
    else a decoder's (`made`: the cell's export request, what it gave, the exporter)."""
    request, exported, exporter = made
    if how.get("encoder_decoder"):
        judge_encoder_decoder(runner, model, spec, request, exporter, tokens, m)
    else:
        folder = exported.genai_folder
        judge(runner, model, spec, request.inputs, tokens, how, folder, dtype, m)


def judge_components(
    parts: Components,
    model: torch.nn.Module,
    tokens: tuple[torch.Tensor, generation.Greedy],
    how: Mapping[str, Any],
    tolerance: tuple[float, float] | None,
    m: Measurements,
) -> None:
    """Generation through transformers' components (its own runners): a decoder's
    `prefill` then `decode`; an encoder-decoder's encoder (exported apart) once on the
    source text, then its steps. Tokens that differ fail the cell."""
    ids, eager = tokens
    traced = {name: kwargs for name, (_, kwargs) in parts.traced.items()}
    if not how.get("encoder_decoder"):
        with stage("ort_run"):
            ort = generation.greedy(generation.component_step(parts.exported.runners, traced), ids)
        generation.require_same(eager, ort, tolerance, m)
        return
    missing = sorted({"prefill", "decode"} - set(parts.exported.runners))
    why = "encoder: not exported" if parts.encoder is None else None
    if missing:
        why = f"no component {missing[0]!r} among {sorted(parts.exported.runners)}"
    if why is not None:  # nothing to generate with: recorded, the components were judged
        m.numerics = replace(m.numerics, generation=Generation.failed(why))
        return
    source = generation.prompt(generation.language_model(model))
    with stage("ort_run"):
        encoded = parts.encoder.runners["model"](
            input_ids=source, attention_mask=torch.ones_like(source)
        )
        step = encdec.component_step(parts.exported.runners, traced, encoded)
        ort = generation.greedy(step, ids)
    generation.require_same(eager, ort, tolerance, m)


def judge_encoder_decoder(
    runner: OrtRunner,
    model: torch.nn.Module,
    spec: ModelSpec,
    request: ExportRequest,
    exporter: str,
    tokens: tuple[torch.Tensor, generation.Greedy],
    m: Measurements,
) -> None:
    """The source text through the encoder exported with the cell's exporter, then the
    decoder steps through the cell's graph; tokens that differ fail the cell."""
    lm = generation.language_model(model)
    source = generation.prompt(lm)
    ids, eager = tokens
    try:
        encoded = _encoded(lm, source, request, exporter, runner.threads)
    except Exception as exc:  # the encoder's export or run: recorded, the step is judged
        found = Generation.failed(f"encoder: {first_line(exc)}")
        m.numerics = replace(m.numerics, generation=found)
        return
    with stage("build"):
        sizes = {"batch": 1, "sequence": 1, "past": 0, "encoder": source.shape[1]}
        empty = dynamic.inputs_at(spec, model, request.inputs, sizes)
    named = dict(zip(empty.names(), empty.leaves(), strict=True))
    empty_self = {k: v.numpy() for k, v in named.items() if ".decoder." in k}
    run = lambda feeds: runner.session.run(runner.output_names, feeds)  # noqa: E731
    mask = torch.ones_like(source).numpy()
    step = encdec.graph_step(
        run, runner.input_names, runner.output_names, encoded, empty_self, mask
    )
    with stage("ort_run"):
        ort = generation.greedy(step, ids)
    generation.require_same(eager, ort, spec.tolerance, m)


def _encoded(
    lm: torch.nn.Module, source: torch.Tensor, request: ExportRequest, exporter: str, threads: int
) -> dict[str, Any]:
    """`EncoderWithCross` exported with the cell's exporter and run in ORT on the source."""
    names = ("encoder_hidden_states", *encdec.cross_names(encdec.layers(lm, source)))
    params = ("input_ids", "attention_mask")
    inputs = Inputs((source, torch.ones_like(source)), {}, params, params)
    folder = request.path.parent / "encoder"
    folder.mkdir(exist_ok=True)
    sub = ExportRequest(
        model=encdec.EncoderWithCross(lm).eval(),
        inputs=inputs,
        opset=request.opset,
        path=folder / "model.onnx",
        dynamic_shapes=({0: "batch", 1: "encoder"}, {0: "batch", 1: "encoder"}),
        output_names=names,
    )
    exporters.get(exporter).export(sub)
    encoder = OrtRunner(sub.path, threads, "cpu")
    encoder.order_outputs(names)
    return dict(zip(encoder.output_names, encoder.run(inputs), strict=True))


def judge(
    runner: OrtRunner,
    model: torch.nn.Module,
    spec: ModelSpec,
    inputs: Inputs,
    tokens: tuple[torch.Tensor, generation.Greedy],
    how: Mapping[str, Any],
    genai_folder: Path | None,
    dtype: Dtype,
    m: Measurements,
) -> None:
    """Every check into the record, then the failures: the single prompt's, then the
    Generator's."""
    ids, eager = tokens
    tolerance = tolerance_at(dtype, spec.tolerance) or DEFAULT_TOLERANCE
    ort = generation.graph_tokens(runner, model, spec, inputs, ids, how)
    found = dict(m.numerics.generations or {})  # the Generator's, where `served` ran first
    rows = batched.prompts(generation.language_model(model))
    eager_rows = _eager_batch(model, rows) if how.get("mask_past", True) else None
    if eager_rows is not None:
        side = batched.padding_for(set(m.export.onnx_ops or {}))
        found["batched"] = _graph_batch(
            runner, model, spec, inputs, rows, eager_rows, side, tolerance
        )
    if genai_folder is not None and "genai" not in found:
        found |= _generator(genai_folder, ids, eager, rows, eager_rows, tolerance)
    m.numerics = replace(m.numerics, generations=found or None)
    generation.require_same(eager, ort, tolerance, m)
    served = found.get("genai")
    if served is not None and served.error is None and not served.ok:
        raise StageFailure("numerics", GeneratorTokensDiffer(_generator_text(served)))


def served(
    folder: Path,
    model: torch.nn.Module,
    tokens: tuple[torch.Tensor, generation.Greedy],
    how: Mapping[str, Any],
    dtype: Dtype,
    tolerance: tuple[float, float] | None,
    m: Measurements,
) -> None:
    """The Generator's checks, first: the path a builder's users take, recorded before the
    graph's own checks, which may fail first (a sliding window's GroupQueryAttention
    refuses a cache shorter than its window, which the Generator allocates)."""
    ids, eager = tokens
    rows = batched.prompts(generation.language_model(model))
    eager_rows = _eager_batch(model, rows) if how.get("mask_past", True) else None
    at = tolerance_at(dtype, tolerance) or DEFAULT_TOLERANCE
    found = _generator(folder, ids, eager, rows, eager_rows, at)
    m.numerics = replace(m.numerics, generations={**(m.numerics.generations or {}), **found})


def _eager_batch(
    model: torch.nn.Module, rows: list[list[int]]
) -> list[generation.Greedy] | Generation:
    """Eager on the left-padded batch, as `generate` runs it; its failure is recorded as
    the batch's (the single prompt's reference already ran)."""
    try:
        lm = generation.language_model(model)
        return batched.greedy(batched.eager_step(lm), rows, batched.LEFT)
    except Exception as exc:  # a model whose eager forward refuses a padded batch
        return Generation.failed(f"eager: {first_line(exc)}", lengths=[len(r) for r in rows])


def _graph_batch(
    runner: OrtRunner,
    model: torch.nn.Module,
    spec: ModelSpec,
    inputs: Inputs,
    rows: list[list[int]],
    eager: list[generation.Greedy] | Generation,
    side: str,
    tolerance: tuple[float, float],
) -> Generation:
    lengths = [len(r) for r in rows]
    if isinstance(eager, Generation):
        return eager
    with stage("build"):
        sizes = {"batch": len(rows), "sequence": 1, "past": 0}
        empty = dynamic.inputs_at(spec, model, inputs, sizes)
    named = dict(zip(empty.names(), empty.leaves(), strict=True))
    past = {k: v for k, v in named.items() if k.startswith("past_key_values.")}
    run = lambda feeds: runner.session.run(runner.output_names, feeds)  # noqa: E731
    step = batched.graph_step(run, runner.input_names, runner.output_names, past)
    try:
        ort = batched.greedy(step, rows, side)
    except Exception as exc:  # ORT refusing the batch is the finding
        return Generation.failed(first_line(exc), lengths=lengths)
    return batched.compare(eager, ort, tolerance, lengths=lengths, side=side)


def _generator(
    folder: Path,
    ids: torch.Tensor,
    eager: generation.Greedy,
    rows: list[list[int]],
    eager_rows: list[generation.Greedy] | Generation | None,
    tolerance: tuple[float, float],
) -> dict[str, Generation]:
    """The Generator on the single prompt and on the batch (padded on the right with the
    config's pad id, as it takes a batch)."""
    lengths = [len(r) for r in rows]
    try:
        single = genai.greedy(folder, [ids[0].tolist()])[0]
    except ImportError:
        return {"genai": Generation.failed(GENAI_MISSING)}
    except Exception as exc:  # the Generator refusing the folder is the finding
        return {"genai": Generation.failed(first_line(exc))}
    found = {"genai": generation.compare(genai.up_to_end(eager, single), single, tolerance)}
    if isinstance(eager_rows, Generation) or eager_rows is None:
        return found
    try:
        got = genai.greedy(folder, rows)
    except Exception as exc:
        found["genai-batched"] = Generation.failed(first_line(exc), lengths=lengths)
        return found
    cut = [genai.up_to_end(e, g) for e, g in zip(eager_rows, got, strict=True)]
    found["genai-batched"] = batched.compare(
        cut, got, tolerance, lengths=lengths, side=batched.RIGHT
    )
    return found


def _generator_text(g: Generation) -> str:
    i = g.first_difference
    assert i is not None and g.eager_tokens is not None and g.ort_tokens is not None
    return (
        "onnxruntime_genai's Generator generates other tokens than eager\n"
        f"first at new token {i} of {g.new_tokens} (eager {g.eager_tokens[i]},"
        f" Generator {g.ort_tokens[i]}); {g.agree} agree"
    )

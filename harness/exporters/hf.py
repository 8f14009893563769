"""transformers' own ONNX exporter (`transformers.exporters`, transformers 5.13 and later):
the call a Hugging Face user makes, with the cell's opset and dynamic setting, then
`save_pretrained(folder)`. It carries its own patches and FX fixes around torch.export and
torch.onnx; the cell judges what it saves.

- A model that can generate: `OnnxExporter().export_for_generation(model, inputs,
  OnnxConfig(...))`, one graph per generation stage (`prefill.onnx`, `decode.onnx`, a
  multimodal model's encoders, language model and head): a language model from a fixed
  prompt (harness.cell.generation), a model fed more than text (Whisper's audio features, a
  vision-language model's images) from the zoo entry's own inputs. The cell judges each
  component on the kwargs transformers captured for it (harness.runtime.components), then,
  where the entry generates, token by token.
- Any other: `OnnxExporter().export(model, inputs, OnnxConfig(...))`, one `model.onnx`.

Where the installed transformers has no `exporters`, its cells are skipped with the reason;
a model that is not a transformers `PreTrainedModel` is not this exporter's to take (skipped).
A zoo entry may wrap one in a module that holds it as `model` (the transformers zoo's
`Exportable`, which flattens the outputs for the bare exporters' graphs): the user's call is
on the wrapped PreTrainedModel, with the same keyword inputs.
"""

from __future__ import annotations

import importlib
import inspect
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from harness.cell import generation
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.exporters.registry_memo import memoised
from harness.exporters.request import Components, Exported, ExportRequest, Opaque, quiet

if TYPE_CHECKING:
    from transformers import Cache, PreTrainedModel

NAME = "transformers"
REQUIREMENT = "'transformers>=5.13'"  # transformers.exporters came in 5.13
INSTALL = f"pip install {REQUIREMENT}"
COMPONENT = "model"  # the one component `export` (not `export_for_generation`) writes
ENCODER = "encoder"  # an encoder-decoder's encoder, exported apart (folder and component)
# A language model's inputs: it generates from the harness's prompt instead.
TEXT_INPUTS = {"input_ids", "attention_mask", "token_type_ids", "position_ids"}
# A decoder step's inputs from its encoder (the decode suite's seq2seq steps): a user
# generates from the source text, and `generate` refuses them.
STEP_INPUTS = {"encoder_hidden_states", "encoder_attention_mask"}


def _exporters() -> object | None:
    try:
        return importlib.import_module("transformers.exporters")
    except ImportError:
        return None


def keyword_inputs(request: ExportRequest) -> dict[str, torch.Tensor | Cache]:
    """The cell's inputs by the model's input names, as transformers' exporter takes them
    (the zoo entry's graph input names, else the forward's parameters in order)."""
    from transformers import Cache

    inputs = request.inputs
    names = inputs.input_names or inputs.params
    given = {**dict(zip(names, inputs.args, strict=False)), **inputs.kwargs}
    return {k: v for k, v in given.items() if isinstance(v, torch.Tensor | Cache)}


def pretrained(model: torch.nn.Module) -> PreTrainedModel | None:
    """The PreTrainedModel a user would export: `model`, or the one it wraps as `model`."""
    from transformers import PreTrainedModel

    for candidate in (model, getattr(model, "model", None)):
        if isinstance(candidate, PreTrainedModel):
            return candidate
    return None


class Adapter(Opaque):
    """The exporter adapter (harness.exporters.ExporterAdapter)."""

    name, call = NAME, "transformers' exporter"

    def unavailable(self) -> str | None:
        if _exporters() is not None:
            return None
        try:
            import transformers

            version = f"transformers {transformers.__version__}"
        except ImportError:
            return f"transformers is not installed: {INSTALL}"
        return f"{version} has no transformers.exporters (it came in 5.13): pip install -U {REQUIREMENT}"

    def refuses(self, model: torch.nn.Module) -> str | None:
        """Why this exporter does not take `model` (it exports PreTrainedModels only)."""
        if pretrained(model) is not None:
            return None
        return f"transformers' exporter takes a PreTrainedModel, not a {type(model).__name__}"

    def sample(self) -> tuple[torch.nn.Module, Inputs] | None:
        """A one-layer BERT from its config (random weights, nothing downloaded)."""
        from transformers import BertConfig, BertModel

        config = BertConfig(
            vocab_size=64,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=32,
        )
        ids = torch.randint(0, 64, (1, 8))
        names = ("input_ids", "attention_mask")
        inputs = Inputs((ids, torch.ones_like(ids)), {}, names, names)
        model: torch.nn.Module = BertModel(config)
        return model.eval(), inputs

    def export(self, request: ExportRequest) -> Exported:
        """The user's call (`export_for_generation` for a model that generates, else
        `export`), then `save_pretrained` into the cell's folder. Each `torch.onnx.export`
        it makes takes dynamo's ONNX function registry from this process's memo, as the
        dynamo exporter's cells do (the protocol's `registry_memo`): export times compare."""
        with memoised(wanted=request.registry_memo):
            return self._export(request)

    def _export(self, request: ExportRequest) -> Exported:
        from transformers.exporters import OnnxConfig  # type: ignore[attr-defined]  # no stubs

        r = request
        model = pretrained(r.model)
        assert model is not None  # the worker skipped the others (refuses)
        dynamic = r.dynamic_shapes is not None
        config = OnnxConfig(dynamic=dynamic, opset_version=r.opset, ort_fusions=r.ort_fusions)
        fused = r.ort_fusions is not None
        if model.can_generate():
            inputs = generation_inputs(model, keyword_inputs(r))
            exported = _for_generation(model, inputs, config, r.path.parent)
            return replace(exported, fused_at_export=fused)
        exported, translate_s = _timed_export(lambda e: e.export(model, keyword_inputs(r), config))
        components = list(exported.components)
        if components != [COMPONENT]:
            problem = f"transformers' export wrote components {components}, not one {COMPONENT!r}"
            raise StageFailure("save", RuntimeError(problem))
        paths, save_s = _saved(exported, r.path.parent)
        phases: dict[str, float | None] = {"translate": translate_s, "save": save_s}
        seconds = translate_s + save_s
        return Exported(paths[COMPONENT], phases, seconds=seconds, fused_at_export=fused)


def _timed_export(call: Callable[[Any], Any]) -> tuple[Any, float]:
    """transformers' exporter called as `call(OnnxExporter())`, and its wall time; its
    failure is the translate stage's."""
    from transformers.exporters import OnnxExporter  # type: ignore[attr-defined]  # no stubs

    start = time.perf_counter()
    with quiet():
        try:
            exported = call(OnnxExporter())  # type: ignore[no-untyped-call]  # transformers' own
        except Exception as exc:
            raise StageFailure("translate", exc) from exc
    return exported, time.perf_counter() - start


def _saved(exported: Any, folder: Path) -> tuple[dict[str, Path], float]:
    """`save_pretrained(folder)`: each component's graph there, and the time it took."""
    start = time.perf_counter()
    try:
        exported.save_pretrained(str(folder))
    except Exception as exc:
        raise StageFailure("save", exc) from exc
    paths = {name: folder / f"{name}.onnx" for name in exported.components}
    missing = [str(p.name) for p in paths.values() if not p.is_file()]
    if missing:
        raise StageFailure("save", FileNotFoundError(f"save_pretrained wrote no {missing}"))
    return paths, time.perf_counter() - start


def generation_inputs(
    model: PreTrainedModel, given: Mapping[str, torch.Tensor | Cache]
) -> dict[str, torch.Tensor]:
    """What a user generates from: a language model's text, the harness's prompt (the one
    the token-by-token check generates from, harness.cell.generation), which is also an
    encoder-decoder's source text where the entry is one of its decoder's steps; a model
    fed more than text (a speech recogniser's audio features, a vision-language model's
    images and the text holding their tokens), the zoo entry's own inputs, as its
    processor gives them."""
    tensors = {
        k: v for k, v in given.items() if isinstance(v, torch.Tensor) and k not in STEP_INPUTS
    }
    if set(tensors) - TEXT_INPUTS:
        return tensors
    ids = generation.prompt(model)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


def _for_generation(
    model: PreTrainedModel, inputs: dict[str, torch.Tensor], config: object, folder: Path
) -> Exported:
    """`export_for_generation` on `inputs`, saved; the kwargs transformers captures for each
    component come from its own `decompose_for_generation` on the same inputs (what
    `export_for_generation` runs)."""
    from transformers.exporters.utils import decompose_for_generation

    exported, translate_s = _timed_export(
        lambda e: e.export_for_generation(model, dict(inputs), config)
    )
    paths, save_s = _saved(exported, folder)
    with quiet():
        traced = decompose_for_generation(model, dict(inputs))
    phases: dict[str, float | None] = {"translate": translate_s, "save": save_s}
    encoder, notes = None, []
    if getattr(model.config, "is_encoder_decoder", False):
        try:
            encoder, phases[ENCODER] = _encoder(model, inputs, config, folder / ENCODER)
            paths[ENCODER] = folder / ENCODER / f"{COMPONENT}.onnx"
        except StageFailure as failure:  # the steps exported: generation says what is missing
            notes.append(f"encoder: {type(failure.error).__name__}: {failure.error}"[:300])
    parts = Components(exported, paths, traced, encoder)
    first = next(iter(paths.values()))
    seconds = sum(v for v in phases.values() if v is not None)
    return Exported(first, phases, seconds=seconds, components=parts, notes=notes)


def _encoder(
    model: PreTrainedModel, inputs: dict[str, torch.Tensor], config: object, folder: Path
) -> tuple[Any, float]:
    """An encoder-decoder's encoder as a user exports it beside `export_for_generation`
    (which leaves it out): `OnnxExporter().export(model.get_encoder(), text, config)`,
    saved; its time (export and save)."""
    encoder = model.get_encoder()
    taken = inspect.signature(encoder.forward).parameters
    given = {k: v for k, v in inputs.items() if k in taken}  # text, or audio features
    exported, export_s = _timed_export(lambda e: e.export(encoder, given, config))
    _, save_s = _saved(exported, folder)
    return exported, export_s + save_s

"""transformers' exporter for generation on a model fed more than text (Whisper's audio
features, a vision-language model's images), the way a user runs it, in a fresh Python
process, no harness code: the zoo entry's model built under the seed (the zoo's build only),
its example inputs, `OnnxExporter().export_for_generation(model, inputs,
OnnxConfig(dynamic=..., opset_version=...))`, `save_pretrained`, then each component run by
transformers' own ORT runner on the kwargs transformers captures for it
(`decompose_for_generation` on the same inputs) against its eager submodule on the same
kwargs.

    python benchmarks/plain_components.py --source model_zoo/transformers/tasks.py \
        --model hf.whisper.speech-seq2seq --opset 18 [--dynamic]

Prints one JSON object: the components, the op counts of each saved graph, and per
component the largest absolute difference of each output.
"""

from __future__ import annotations

import argparse
import collections
import copy
import importlib.util
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import onnx
import torch
import torch.utils._pytree as pytree

# removed as the script exits (a folder of its own per run)
SCRATCH = tempfile.TemporaryDirectory()

REPO = Path(__file__).resolve().parents[1]


def _entry(source: Path, name: str) -> tuple[Any, dict[str, torch.Tensor]]:
    """The zoo entry's PreTrainedModel and its example inputs by name, seeded as a cell."""
    sys.path.insert(0, str(REPO))  # the zoo's build only, as the harness's cell builds it
    spec_of = importlib.util.spec_from_file_location("zoo_entry", source)
    assert spec_of is not None and spec_of.loader is not None
    module = importlib.util.module_from_spec(spec_of)
    spec_of.loader.exec_module(module)
    (spec,) = [s for s in module.SPECS if s.name == name]
    torch.manual_seed(0)
    model = spec.build().eval().model  # the zoo's wrapper holds the PreTrainedModel
    torch.manual_seed(0)
    inputs = dict(zip(spec.input_names, spec.example_inputs(), strict=True))
    return model, inputs


def _tensors(output: Any) -> list[torch.Tensor]:
    return [t for t in pytree.tree_leaves(output) if isinstance(t, torch.Tensor)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--opset", type=int, default=18)
    parser.add_argument("--dynamic", action="store_true")
    args = parser.parse_args()
    from transformers.exporters import OnnxConfig, OnnxExporter
    from transformers.exporters.utils import decompose_for_generation

    model, inputs = _entry(args.source, args.model)
    config = OnnxConfig(dynamic=args.dynamic, opset_version=args.opset)
    exported = OnnxExporter().export_for_generation(model, dict(inputs), config)
    folder = Path(SCRATCH.name)
    exported.save_pretrained(str(folder))
    ops = {}
    for name in exported.components:
        graph = onnx.load(str(folder / f"{name}.onnx"), load_external_data=False).graph
        ops[name] = dict(collections.Counter(n.op_type for n in graph.node))
    max_abs = {}
    for name, (submodule, kwargs) in decompose_for_generation(model, dict(inputs)).items():
        got = _tensors(exported.runners[name](**copy.deepcopy(kwargs)))
        with torch.no_grad():
            want = _tensors(submodule(**copy.deepcopy(kwargs)))
        max_abs[name] = [
            float((g.float() - w.float()).abs().max()) for g, w in zip(got, want, strict=True)
        ]
    print(json.dumps({"components": list(exported.components), "ops": ops, "max_abs": max_abs}))


if __name__ == "__main__":
    main()

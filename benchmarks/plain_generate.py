"""transformers' exporter for generation the way a user runs it, in a fresh Python process,
no harness code: a decode entry's language model built from the shrunk config under the
seed, `OnnxExporter().export_for_generation(model, {input_ids, attention_mask},
OnnxConfig(dynamic=True, opset_version=...))` on the prompt given, `save_pretrained`, then
`model.generate(max_new_tokens=16, do_sample=False)` twice: in eager, and with the model's
forward replaced by transformers' own ORT runners of the saved components (prefill for the
first call, decode after). The harness generates through its own loop
(harness.cell.generation); this one uses transformers' `generate`, so agreeing tokens say
both loops are the same greedy decoding.

    python benchmarks/plain_generate.py --model hf.llama.decode --opset 18 --prompt 5,17,...

Prints one JSON object: the components, the op counts of each saved graph, the eager and
ORT tokens and the largest logits difference per step.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import sys
import tempfile
from pathlib import Path

import onnx
import torch

# removed as the script exits (a folder of its own per run)
SCRATCH = tempfile.TemporaryDirectory()

REPO = Path(__file__).resolve().parents[1]
NEW_TOKENS = 16


def _language_model(name: str) -> torch.nn.Module:
    sys.path.insert(0, str(REPO))  # the zoo's build only, as the harness's cell builds it
    from model_zoo.transformers.decoders import SPECS

    (spec,) = [s for s in SPECS if s.name == name]
    torch.manual_seed(0)
    return spec.build().eval().model


def _generate(model: torch.nn.Module, ids: torch.Tensor) -> tuple[list[int], list[torch.Tensor]]:
    with torch.no_grad():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            output_logits=True,
            return_dict_in_generate=True,
        )
    return out.sequences[0, ids.shape[1] :].tolist(), [step[0] for step in out.logits]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", required=True)
    parser.add_argument("--opset", type=int, default=18)
    parser.add_argument("--prompt", required=True, help="token ids, comma-separated")
    args = parser.parse_args()
    from transformers.exporters import OnnxConfig, OnnxExporter

    model = _language_model(args.model)
    ids = torch.tensor([[int(t) for t in args.prompt.split(",")]])
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    config = OnnxConfig(dynamic=True, opset_version=args.opset)
    exported = OnnxExporter().export_for_generation(model, inputs, config)
    folder = Path(SCRATCH.name)
    exported.save_pretrained(str(folder))
    ops = {}
    for name in exported.components:
        graph = onnx.load(str(folder / f"{name}.onnx"), load_external_data=False).graph
        ops[name] = dict(collections.Counter(n.op_type for n in graph.node))
    eager, eager_logits = _generate(model, ids)
    runners, forward, calls = exported.runners, model.forward, []

    @functools.wraps(forward)  # generate reads the forward's signature
    def through_ort(*_: object, **kwargs: object) -> object:
        runner = runners["prefill" if not calls else "decode"]
        calls.append(1)
        return runner(**{k: v for k, v in kwargs.items() if k in runner.metadata.kwargs})

    model.forward = through_ort
    ort, ort_logits = _generate(model, ids)
    errors = [float((a - b).abs().max()) for a, b in zip(eager_logits, ort_logits, strict=True)]
    print(json.dumps({"components": list(exported.components), "ops": ops, "eager": eager,
                      "ort": ort, "max_logits_abs": errors}))  # fmt: skip


if __name__ == "__main__":
    main()

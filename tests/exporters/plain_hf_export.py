"""A plain script, no harness code in the path it measures: build one transformers zoo
entry's PreTrainedModel, export it as a Hugging Face user does (`OnnxExporter().export`,
then `save_pretrained`), run the saved model in an ORT CPU session, and print as JSON the
graph's op counts and the largest difference from eager per output.

    python plain_hf_export.py ZOO_FILE MODEL OPSET
"""

import collections
import importlib.util
import json
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
import torch
from transformers.exporters import OnnxConfig, OnnxExporter

# removed as the script exits (a folder of its own per run)
SCRATCH = tempfile.TemporaryDirectory()


def main(zoo_file: str, name: str, opset: str) -> None:
    found = importlib.util.spec_from_file_location("zoo", zoo_file)
    module = importlib.util.module_from_spec(found)
    found.loader.exec_module(module)
    (spec,) = [s for s in module.SPECS if s.name == name]
    torch.manual_seed(0)
    model = spec.build().eval().model  # the PreTrainedModel the zoo's wrapper holds
    torch.manual_seed(0)
    inputs = dict(zip(spec.input_names, spec.example_inputs(), strict=True))
    with torch.no_grad():
        eager = model(**inputs).to_tuple()
    exported = OnnxExporter().export(model, inputs, OnnxConfig(opset_version=int(opset)))
    folder = SCRATCH.name
    exported.save_pretrained(folder)
    graph = onnx.load(f"{folder}/model.onnx", load_external_data=False).graph
    session = ort.InferenceSession(f"{folder}/model.onnx", providers=["CPUExecutionProvider"])
    got = session.run(None, {k: v.numpy() for k, v in inputs.items()})
    diffs = [float(np.abs(g - e.numpy()).max()) for g, e in zip(got, eager, strict=False)]
    ops = collections.Counter(n.op_type for n in graph.node)
    print(json.dumps({"ops": dict(ops), "max_abs": diffs, "outputs": len(got)}))


if __name__ == "__main__":
    main(*sys.argv[1:])

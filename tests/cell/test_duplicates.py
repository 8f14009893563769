"""A graph that stores a weight twice (harness/cell/graph.py): the copies are found by their
values, inline or in external data, named, and their bytes counted; a real tied embedding
exported by both exporters shows which one duplicates it (issue 47: Qwen3-0.6B's
TorchScript graph carried its tied embedding twice, 618 MB)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper, numpy_helper

from harness.cell.graph import duplicate_initializers


def _graph(path: Path, weights: dict[str, np.ndarray], *, external: str) -> onnx.ModelProto:
    """Add of every weight to the input: each weight an initializer of the graph, inline
    (""), in one external file ("one"), or a file each without their lengths ("each": as
    the TorchScript exporter writes a graph over 2 GB)."""
    names = list(weights)
    nodes = [helper.make_node("Add", ["x", n], [f"y{i}"]) for i, n in enumerate(names)]
    outputs = [
        helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None) for i in range(len(names))
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
        outputs,
        [numpy_helper.from_array(w, n) for n, w in weights.items()],
    )
    model = helper.make_model(graph)
    onnx.save(model, path, save_as_external_data=bool(external), size_threshold=0,
              all_tensors_to_one_file=external == "one", location="w.data")  # fmt: skip
    saved = onnx.load(path, load_external_data=False)
    if external == "each":
        for tensor in saved.graph.initializer:
            kept = [e for e in tensor.external_data if e.key in ("location", "offset")]
            del tensor.external_data[:]
            tensor.external_data.extend(kept)
        onnx.save(saved, path)
    return saved


@pytest.mark.parametrize("external", ["", "one", "each"])
def test_equal_weights_are_one_group_and_their_copies_counted(
    tmp_path: Path, external: str
) -> None:
    rng = np.random.default_rng(0)
    a, b = (
        rng.standard_normal((64, 64), dtype=np.float32),
        rng.standard_normal((64, 64), dtype=np.float32),
    )
    same_prefix = a.copy()
    same_prefix[-1, -1] += 1  # equal in their first bytes, different at the end
    weights = {"a": a, "b": b, "a_again": a.copy(), "a_thrice": a.copy(), "near_a": same_prefix,
               "small": np.ones((4,), np.float32), "small_again": np.ones((4,), np.float32),
               "ones": np.ones((64, 64), np.float32), "ones_again": np.ones((64, 64), np.float32)}  # fmt: skip
    model = _graph(tmp_path / "m.onnx", weights, external=external)
    groups, copies = duplicate_initializers(tmp_path / "m.onnx", model)
    # tensors under 1 KiB are not looked at; nor are constant ones (a fresh model's norms)
    assert groups == [["a", "a_again", "a_thrice"]]
    assert copies == 2 * a.nbytes


@pytest.mark.slow  # two real exports
@pytest.mark.parametrize(("dynamo", "copies"), [(False, 1), (True, 0)])
def test_a_tied_embedding_saved_twice_is_named(tmp_path: Path, dynamo: bool, copies: int) -> None:
    """A language model whose head shares the embedding's weight (tied, as Qwen3's and
    Llama-3.2's are), exported as a user exports it: TorchScript keeps the table for the
    lookup and a transposed copy for the head's MatMul (torch 2.13), dynamo keeps one."""
    torch.manual_seed(0)

    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(300, 32)
            self.head = torch.nn.Linear(32, 300, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.head(torch.relu(self.embed(ids)))

    path = tmp_path / "tied.onnx"
    ids = (torch.zeros(1, 5, dtype=torch.int64),)
    torch.onnx.export(Tied().eval(), ids, str(path), dynamo=dynamo)
    groups, copied = duplicate_initializers(path, onnx.load(path, load_external_data=False))
    assert copied == copies * 300 * 32 * 4
    assert len(groups) == copies and all(len(g) == 2 for g in groups)

"""The torch.export-based exporter docs' MLP that takes a tensor, a dict and a list, with a dynamic batch."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec


class MLPModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc0 = nn.Linear(8, 8, bias=True)
        self.fc1 = nn.Linear(8, 4, bias=True)
        self.fc2 = nn.Linear(4, 2, bias=True)
        self.fc3 = nn.Linear(2, 2, bias=True)
        self.fc_combined = nn.Linear(8 + 8 + 8, 8, bias=True)  # combine all inputs

    # The annotations are the docs' own (bare `dict` and `list`); torch.jit.script needs
    # Dict[str, Tensor] and List[Tensor], which is part of what this seed shows.
    def forward(self, tensor_x: torch.Tensor, input_dict: dict, input_list: list) -> torch.Tensor:
        combined = torch.cat([tensor_x, input_dict["tensor_x"], input_list[0]], dim=1)
        combined = torch.sigmoid(self.fc_combined(combined))
        combined = torch.sigmoid(self.fc0(combined))
        combined = torch.sigmoid(self.fc1(combined))
        combined = torch.sigmoid(self.fc2(combined))
        return self.fc3(combined)


def build() -> nn.Module:
    return MLPModel()


def example_inputs() -> tuple[object, ...]:
    tensor_input = torch.rand((97, 8), dtype=torch.float32)
    dict_input = {"tensor_x": torch.rand((97, 8), dtype=torch.float32)}
    list_input = [torch.rand((97, 8), dtype=torch.float32)]
    return tensor_input, dict_input, list_input


SPEC = ModelSpec(
    name="mlp_dict_list",
    family="seed",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch_size"}, {"tensor_x": {0: "batch_size"}}, [{0: "batch_size"}]),
    tags=("seed", "mlp", "doc-example", "dict-inputs", "list-inputs"),
    description="torch.onnx docs' MLPModel over a tensor, a dict and a list input with a shared dynamic batch",
    expect=(
        Expect(
            "torchscript-script",
            status="export_failed",
            stage="capture",
            reason="torch.jit.script cannot compile the docs' bare `dict` annotation (Unknown type name 'dict'; "
            "it needs Dict[str, Tensor] and List[Tensor])",
        ),
    ),
)

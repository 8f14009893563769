"""Data-dependent Python control flow: tracing bakes in one branch, scripting keeps an If node."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec


class ControlFlow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return self.linear(x) * 2
        return -self.linear(x)


def build() -> nn.Module:
    return ControlFlow()


def example_inputs() -> tuple[torch.Tensor, ...]:
    # Row 0 sums to < 0, the whole batch to > 0: the example takes the `if` branch, the
    # second dynamic shape (batch 1, i.e. row 0) the `else` branch. A traced graph that
    # kept only the `if` branch is then wrong there, and the dynamic check shows it.
    return (torch.tensor([[-1.0, -0.5, 0.25, -0.75], [2.0, 1.5, 0.5, 1.0]]),)


SPEC = ModelSpec(
    name="control_flow",
    family="seed",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch"},),
    tags=("seed", "control-flow", "doc-example"),
    description="`if x.sum() > 0` in forward: traced vs scripted graphs differ",
    expect=(
        Expect(
            "dynamo",
            status="export_failed",
            stage="capture",
            reason="torch.export cannot branch on a tensor value: GuardOnDataDependentSymNode on "
            "`if x.sum() > 0` (needs torch.cond)",
        ),
        Expect(
            "torchscript",
            status="dynamic_mismatch",
            stage="dynamic",
            shape="dynamic",
            reason="tracing records only the branch the example took; at the second shape (batch 1, "
            "sum < 0) eager takes the other branch, so the ONNX model gives wrong values",
        ),
    ),
)

"""The docs' autograd.Function examples: MyRelu with a static symbolic method, MyLogExp inlined."""

from __future__ import annotations

import torch
from torch import nn

from harness.zoo import Expect, ModelSpec


class MyRelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        return input.clamp(min=0)

    @staticmethod
    def symbolic(g: torch.Graph, input: torch.Value) -> torch.Value:
        return g.op("Clip", input, g.op("Constant", value_t=torch.tensor(0, dtype=torch.float)))


class MyLogExp(torch.autograd.Function):
    @staticmethod
    def forward(ctx, input: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(input)
        h = input.exp()
        return h.log().log()


class ReluModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MyRelu.apply(self.linear(x))


class LogExpModel(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return MyLogExp.apply(x)


def relu_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(4, 8),)


def logexp_inputs() -> tuple[torch.Tensor, ...]:
    # log(log(exp(x))) = log(x): finite only for x > 0.
    return (torch.rand(4, 8) + 0.5,)


# torch.jit.script keeps MyX.apply as a prim::PythonOp without a Subgraph, which the
# TorchScript exporter cannot convert (tracing inlines it or uses the symbolic instead).
SCRIPT_FAILS = Expect(
    "torchscript-script",
    status="export_failed",
    stage="translate",
    reason="a scripted autograd.Function call stays a prim::PythonOp; export fails with "
    "\"required keyword attribute 'Subgraph' is undefined\"",
)

SPECS = [
    ModelSpec(
        name="autograd_symbolic",
        family="seed",
        build=ReluModel,
        example_inputs=relu_inputs,
        dynamic_shapes=({0: "batch"},),
        tags=("seed", "autograd-function", "doc-example"),
        description="torch.onnx docs' MyRelu: autograd.Function with a static symbolic (Clip)",
        expect=(SCRIPT_FAILS,),
    ),
    ModelSpec(
        name="autograd_inline",
        family="seed",
        build=LogExpModel,
        example_inputs=logexp_inputs,
        dynamic_shapes=({0: "batch"},),
        tags=("seed", "autograd-function", "doc-example"),
        description="torch.onnx docs' MyLogExp: autograd.Function without symbolic, inlined (Exp, Log, Log)",
        expect=(SCRIPT_FAILS,),
    ),
]

"""A model whose numbers the exporter's optimizer breaks (issue 27): importing this file
adds a wrong rewrite rule to onnxscript's default rules, which the exporter's optimizer
applies (`optimize=True`, the default): `Sin(Cos(x))` becomes `Cos(x)`. With
`optimize=False` the model exports right. Only `Sin(Cos(...))` matches, and the rule lives
in the process that imported this file (a cell's own).
"""

from __future__ import annotations

import torch
from onnxscript import rewriter
from onnxscript.rewriter import pattern

from harness.zoo import ModelSpec

RULE = "FoldSinOfCos"


def _sin_of_cos(op, x):  # type: ignore[no-untyped-def]
    return op.Sin(op.Cos(x))


def _wrong(op, x):  # type: ignore[no-untyped-def]
    return op.Cos(x)  # the bug: sin(cos(x)) is not cos(x)


def _add_rule() -> None:
    if not any(getattr(r, "name", None) == RULE for r in rewriter._DEFAULT_REWRITE_RULES):
        rule = pattern.RewriteRule(_sin_of_cos, _wrong, name=RULE)
        rewriter._DEFAULT_REWRITE_RULES = (*rewriter._DEFAULT_REWRITE_RULES, rule)


_add_rule()


class SinOfCos(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Linear(8, 8)
        self.second = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.first(x))
        return self.second(torch.sin(torch.cos(y)) * 2.0)


SPEC = ModelSpec(
    name="repro_optimizer_rule",
    family="seed",
    build=SinOfCos,
    example_inputs=lambda: (torch.rand(2, 8),),
    tags=("repro",),
)

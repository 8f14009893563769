"""Models whose failure sits in one block's own code (issue 37): the graph minimizer has no
captured node to cut, and the repro is that block, exported alone with the inputs it got.

- `repro_block_capture`: block 7 of 12 branches on a tensor's value (torch.export cannot
  capture it: a data-dependent guard, the capture failure language models hit most);
- `repro_block_export_only`: inside block 9 of 12, an export-only branch
  (`torch.compiler.is_exporting()`) changes a scale, so the captured program itself
  differs from eager (a numerics mismatch made at capture);
- `repro_block_tracer`: block 5 of 12 calls an autograd.Function whose ONNX symbolic passes
  a string where TorchScript's graph wants a tensor (the TorchScript exporter fails in the
  tracer's own graph; torch.export inlines the function's forward, so the program it
  captured exports fine);
- `repro_keyword_tracer`: blocks called by keyword through a decorator that passes
  `use_cache` on, as transformers' layers are, and block 3 of 12 has the tracer's quirk
  above and a data-dependent branch, so that torch.export captures nothing of the model
  either (no program to shrink): exported alone with its keyword input, the block fails
  otherwise ("got multiple values for argument 'use_cache'") unless it is called by keyword
  inside a module that takes the tensor;
- `repro_block_specialised`: a dynamic cell (batch declared dynamic) whose block 6 of 12
  branches on the batch size, so torch.export specialises the dimension: static, every
  block exports fine; only with the cell's dynamic axes carried into the block's own
  export does it fail the cell's way;
- `repro_block_tracer_dynamic`: `repro_block_tracer` as a dynamic cell: the block goes
  through TorchScript with its dynamic axes (`dynamic_axes`, by input name).

Each block holds a `ModuleList` of three residual mixers that the failure does not need.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from harness.zoo import ModelSpec


class Double(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def, override]
        return x * 2

    @staticmethod
    def symbolic(g, x):  # type: ignore[no-untyped-def]
        return g.op("Mul", x, "two")  # the bug: an attribute-like string as the second input


class Mixer(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.nn.functional.gelu(self.fc(x))


class Block(torch.nn.Module):
    def __init__(self, width: int, quirk: str = "") -> None:
        super().__init__()
        self.mixers = torch.nn.ModuleList(Mixer(width) for _ in range(3))
        self.norm = torch.nn.LayerNorm(width)
        self.quirk = quirk

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for mixer in self.mixers:
            x = mixer(x)
        x = self.norm(x)
        if self.quirk == "data_dependent":
            return x + 1.0 if x.sum() > 0 else x - 1.0
        if self.quirk == "export_only":
            return x * (0.5 if torch.compiler.is_exporting() else 0.25)
        if self.quirk == "symbolic":
            return Double.apply(x)
        if self.quirk == "batch_of_two":
            return x * 2.0 if x.shape[0] == 2 else x
        if self.quirk == "uncapturable":
            return Double.apply(x) if x.abs().sum() > 0 else x  # true, but data-dependent
        return x


def keeps_cache_flag(forward: Callable[..., Any]) -> Callable[..., Any]:
    """Passes `use_cache` on by keyword, as transformers' decorators do."""

    @functools.wraps(forward)
    def wrapper(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("use_cache", False)
        return forward(self, *args, **kwargs)

    return wrapper


class KeywordBlock(Block):
    """A block called by keyword, with more parameters after its input."""

    @keeps_cache_flag
    def forward(  # type: ignore[override]
        self, hidden: torch.Tensor, mask: torch.Tensor | None = None, use_cache: bool = False
    ) -> torch.Tensor:
        return super().forward(hidden)


class Stack(torch.nn.Module):
    """`depth` blocks between an input and an output projection; block `at` has `quirk`."""

    def __init__(
        self, quirk: str, at: int, depth: int = 12, width: int = 16, block: type[Block] = Block
    ) -> None:
        super().__init__()
        self.embed = torch.nn.Linear(8, width)
        self.blocks = torch.nn.ModuleList(
            block(width, quirk if i == at else "") for i in range(depth)
        )
        self.head = torch.nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(hidden=x) if isinstance(block, KeywordBlock) else block(x)
        return self.head(x)


def _spec(
    name: str, quirk: str, at: int, block: type[Block] = Block, *, dynamic: bool = False
) -> ModelSpec:
    return ModelSpec(
        name=name,
        family="seed",
        build=lambda: Stack(quirk, at, block=block),
        example_inputs=lambda: (torch.rand(2, 8),),
        dynamic_shapes=({0: "batch"},) if dynamic else None,
        tags=("repro",),
    )


SPECS = [
    _spec("repro_block_capture", "data_dependent", 7),
    _spec("repro_block_export_only", "export_only", 9),
    _spec("repro_block_tracer", "symbolic", 5),
    _spec("repro_keyword_tracer", "uncapturable", 3, KeywordBlock),
    _spec("repro_block_specialised", "batch_of_two", 6, dynamic=True),
    _spec("repro_block_tracer_dynamic", "symbolic", 5, dynamic=True),
]

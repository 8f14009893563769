"""Models whose verdicts at float16 and bfloat16 tests/cell/test_precision.py checks against
a plain export + ONNX Runtime script."""

import torch

from harness.zoo import ModelSpec


class LargeRMSNorm(torch.nn.Module):
    """A hand-written RMSNorm: x**2 of activations near 300 overflows float16 in eager
    (inf, then rsqrt gives 0), while ORT's CPU provider computes the float16 graph in
    float32 inside and gives the float32 model's value."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class Dense(torch.nn.Module):
    """A Linear: ORT's CPU provider has no bfloat16 Gemm."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x).relu()


class Norm(torch.nn.Module):
    """A LayerNorm: ORT's CPU provider runs it in bfloat16 (I/O through OrtValues)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


SPECS = [
    ModelSpec("large_rmsnorm", "precision", LargeRMSNorm, lambda: (torch.randn(2, 64) * 30 + 300,)),
    ModelSpec(
        "dense", "precision", Dense, lambda: (torch.randn(4, 16),), dynamic_shapes=({0: "batch"},)
    ),
    ModelSpec("norm", "precision", Norm, lambda: (torch.randn(4, 16),)),
]

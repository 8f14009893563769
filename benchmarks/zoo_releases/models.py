"""Two real exporter bugs of 2026 as zoo entries, for the benchmarks on real releases
(benchmarks/test_channels_releases.py, benchmarks/bisect_releases.py).

- `int_mask_attention`: an attention-mask preparation as Hugging Face models write it,
  `1.0 - attention_mask` on an int64 mask (pytorch#194381: the dynamo exporter's type
  promotion pass fails on it from torch 2.13.0 on; 2.11.0 and 2.12.1 export it).
- `addmm_beta_bn`: `torch.addmm(b, x, W, beta=0.5)` then BatchNorm1d in eval mode, which
  onnxscript's optimizer fuses into one Gemm (FuseBatchNormIntoGemm); onnxscript 0.6.2
  folds the BatchNorm into the bias without Gemm's beta: wrong numbers in ORT.
"""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec


class IntMaskAttention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = torch.nn.Linear(16, 16)
        self.k = torch.nn.Linear(16, 16)

    def forward(self, hidden: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        scores = self.q(hidden) @ self.k(hidden).transpose(-1, -2) / 4.0
        inverted = 1.0 - attention_mask[:, None, :]  # aten.rsub.Scalar on an int64 tensor
        bias = inverted * torch.finfo(torch.float32).min
        return torch.softmax(scores + bias, dim=-1) @ hidden


class AddmmBeta(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.w = torch.nn.Parameter(torch.randn(32, 16, generator=g) / 4)
        self.b = torch.nn.Parameter(torch.randn(32, generator=g))
        self.bn = torch.nn.BatchNorm1d(32, eps=1e-3)
        self.bn.running_mean.copy_(torch.randn(32, generator=g) * 3)
        self.bn.running_var.copy_(torch.rand(32, generator=g) * 4 + 0.25)
        self.bn.weight.data.copy_(torch.randn(32, generator=g))
        self.bn.bias.data.copy_(torch.randn(32, generator=g))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.addmm(self.b, x, self.w.t(), beta=0.5))


def _mask() -> torch.Tensor:
    return torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]], dtype=torch.int64)


SPECS = [
    ModelSpec(
        name="int_mask_attention",
        family="releases",
        build=IntMaskAttention,
        example_inputs=lambda: (torch.rand(2, 4, 16), _mask()),
    ),
    ModelSpec(
        name="addmm_beta_bn",
        family="releases",
        build=lambda: AddmmBeta().eval(),
        example_inputs=lambda: (torch.rand(8, 16),),
    ),
]

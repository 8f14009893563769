"""Models whose verdicts at float16 and bfloat16 (tests/cell/test_precision.py) and under
ORT's optimisations (tests/cell/test_ort_opt.py) are checked against plain scripts."""

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


class GeluBlock(torch.nn.Module):
    """Linear, GELU, residual, LayerNorm: onnxruntime.transformers fuses it into BiasGelu and
    SkipLayerNormalization. At float16, on activations near 30, the fused
    SkipLayerNormalization rounds differently from eager on more than 1% of the elements,
    while staying as close to the float32 model as eager: rounding, not a loss."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(64, 64)
        self.norm = torch.nn.LayerNorm(64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.nn.functional.gelu(self.fc(x)) + x)


def _fake_quant(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.fake_quantize_per_tensor_affine(x, scale, 0, -128, 127)


class QuantConv(torch.nn.Module):
    """A fake-quantized convolution (QuantizeLinear/DequantizeLinear around it in ONNX), as
    a quantization-aware model ships: ORT_ENABLE_ALL fuses it into an integer QLinearConv
    whose bias ORT quantizes too (WeightBiasQuantization), one quantization step off eager
    on a few elements; the graph as exported gives eager's numbers exactly."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = _fake_quant(self.conv.weight, 0.01)
        y = torch.nn.functional.conv2d(_fake_quant(x, 0.05), weight, self.conv.bias, padding=1)
        return _fake_quant(y, 0.05)


class SmallConv(torch.nn.Module):
    """Two convolutions: ONNX's Conv takes bfloat16 only from opset 22, and the exporters
    write one at opset 18 anyway (`checker_failed` at bfloat16, ok at float32)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.second = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x).relu())


SPECS = [
    ModelSpec("large_rmsnorm", "precision", LargeRMSNorm, lambda: (torch.randn(2, 64) * 30 + 300,)),
    ModelSpec(
        "dense", "precision", Dense, lambda: (torch.randn(4, 16),), dynamic_shapes=({0: "batch"},)
    ),
    ModelSpec("norm", "precision", Norm, lambda: (torch.randn(4, 16),)),
    ModelSpec("gelu_block", "precision", GeluBlock, lambda: (torch.randn(2, 8, 64) + 30,)),
    ModelSpec("quant_conv", "precision", QuantConv, lambda: (torch.randn(1, 8, 8, 8),)),
    ModelSpec("small_conv", "precision", SmallConv, lambda: (torch.randn(1, 3, 8, 8),)),
]

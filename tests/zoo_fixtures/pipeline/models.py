"""One small model as a whole-model entry and as a sampled entry (two samples), for the
tests of the per-cell pipeline that both share (tests/runtime/test_pipeline.py)."""

from __future__ import annotations

import torch

from harness.zoo import ModelSpec, Sample, SampleSet


class Sine(torch.nn.Module):
    """`torch.sin`, looked up when it is called: what the `sin-to-cos` test patch
    (sin_to_cos.py) changes while the cell exports."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * 2.0


def _input(n: int) -> torch.Tensor:
    return torch.linspace(0.5, 2.5, n).reshape(1, n)


def _samples() -> SampleSet:
    samples = tuple(
        Sample(index=i, build=Sine, inputs=(_input(4 + 2 * i),), description=f"x [1, {4 + 2 * i}]")
        for i in range(2)
    )
    return SampleSet(samples, total=2)


SPECS = [
    ModelSpec(name="sine", family="seed", build=Sine, example_inputs=lambda: (_input(6),)),
    ModelSpec(
        name="sine_sampled",
        family="opinfo",
        build=Sine,
        example_inputs=lambda: (),
        samples=_samples,
    ),
]

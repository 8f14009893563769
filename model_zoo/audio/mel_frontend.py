"""Log-mel spectrogram from torch ops: reflect pad, unfold framing, Hann window, DFT matmuls, mel matmul, log."""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from harness.zoo import Expect, ModelSpec

SAMPLE_RATE, N_FFT, HOP, N_MELS = 8000, 128, 64, 20


def hz_to_mel(f: torch.Tensor) -> torch.Tensor:
    return 2595.0 * torch.log10(1.0 + f / 700.0)


def mel_filterbank(n_freqs: int, n_mels: int, sample_rate: int) -> torch.Tensor:
    """(n_freqs, n_mels) triangular HTK mel filters, as torchaudio's melscale_fbanks builds them."""
    freqs = torch.linspace(0, sample_rate / 2, n_freqs, dtype=torch.float64)
    mel_points = torch.linspace(
        0.0, float(hz_to_mel(torch.tensor(sample_rate / 2.0))), n_mels + 2, dtype=torch.float64
    )
    hz_points = 700.0 * (10 ** (mel_points / 2595.0) - 1.0)
    slopes = hz_points[None, :] - freqs[:, None]  # (n_freqs, n_mels + 2)
    widths = hz_points[1:] - hz_points[:-1]
    down = -slopes[:, :-2] / widths[:-1]
    up = slopes[:, 2:] / widths[1:]
    return torch.clamp(torch.minimum(down, up), min=0.0).float()


class MelFrontend(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        n_freqs = N_FFT // 2 + 1
        n = torch.arange(N_FFT, dtype=torch.float64)[:, None]
        k = torch.arange(n_freqs, dtype=torch.float64)[None, :]
        angle = 2 * math.pi * n * k / N_FFT
        self.register_buffer("window", torch.hann_window(N_FFT, periodic=True), persistent=False)
        self.register_buffer("dft_cos", torch.cos(angle).float(), persistent=False)
        self.register_buffer("dft_sin", -torch.sin(angle).float(), persistent=False)
        self.register_buffer("mel", mel_filterbank(n_freqs, N_MELS, SAMPLE_RATE), persistent=False)

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        """waveform: (batch, samples) -> (batch, frames, N_MELS) log-mel energies."""
        padded = F.pad(waveform[:, None], (N_FFT // 2, N_FFT // 2), mode="reflect")[:, 0]
        frames = padded.unfold(-1, N_FFT, HOP) * self.window  # (batch, frames, N_FFT)
        real, imag = frames @ self.dft_cos, frames @ self.dft_sin
        power = real.pow(2) + imag.pow(2)
        return torch.log(power @ self.mel + 1e-6)


def build() -> nn.Module:
    return MelFrontend()


def example_inputs() -> tuple[torch.Tensor, ...]:
    t = torch.arange(2048, dtype=torch.float32) / SAMPLE_RATE
    tone = torch.sin(2 * math.pi * 440.0 * t)
    return (0.5 * tone + 0.1 * torch.randn(2, 2048),)


SPEC = ModelSpec(
    name="mel_frontend",
    family="audio",
    build=build,
    example_inputs=example_inputs,
    dynamic_shapes=({0: "batch", 1: "samples"},),
    tags=("audio", "spectrogram", "dsp"),
    description="Log-mel front end: reflect pad, unfold framing, Hann window, DFT as matmul, mel filterbank, log",
    expect=(
        Expect(
            "torchscript",
            status="export_failed",
            stage="translate",
            reason="Unfold on the reflect-padded signal: 'ONNX export of operator Unfold, input size not "
            "accessible' (the traced pad output has no static sizes)",
        ),
        Expect(
            "torchscript-script",
            status="export_failed",
            stage="capture",
            reason="torch.jit.script: forward reads module-level int constants, which TorchScript "
            "cannot close over ('python value of type int cannot be used as a value')",
        ),
    ),
)

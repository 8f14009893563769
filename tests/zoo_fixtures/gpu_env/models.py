"""A model whose build reports the GPUs its process sees (CUDA_VISIBLE_DEVICES) as its
build error, so a test reads what a cell's process was given from the record."""

from __future__ import annotations

import os

import torch

from harness.zoo import ModelSpec


def _report_visible() -> torch.nn.Module:
    seen = {
        k: os.environ.get(k, "<unset>")
        for k in ("CUDA_VISIBLE_DEVICES", "PYTORCH_NVML_BASED_CUDA_CHECK")
    }
    raise RuntimeError(" ".join(f"{k}={v}" for k, v in seen.items()))


SPEC = ModelSpec(
    name="report_visible_gpus",
    family="test",
    build=_report_visible,
    example_inputs=lambda: (torch.zeros(1),),
)

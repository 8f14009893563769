"""sin-to-cos: a test patch for tests/runtime/test_pipeline.py: while it is applied,
`torch.sin` is `torch.cos`, so an exported graph shows whether the patch was in place
(Cos where the model calls torch.sin) and its numbers differ from eager's."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch


def unavailable() -> str | None:
    return None


@contextlib.contextmanager
def applied() -> Iterator[None]:
    sin = torch.sin
    torch.sin = torch.cos
    try:
        yield
    finally:
        torch.sin = sin

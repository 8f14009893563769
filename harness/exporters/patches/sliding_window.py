"""`sliding-window`: a sliding-window cache layer (transformers' `DynamicSlidingWindowLayer`)
keeps the number of tokens it has seen in a Python int (`cumulative_length`). torch.export
flattens the cache into its tensors and keeps that int as a constant, so the length of the
past the mask is built from is the example's: an export declared dynamic in the past length
fails ("tracing inferred a static shape of 5 for dimension inputs['past_key_values'][0].shape[2]"),
and one that gets through answers for that length only.

While the layer holds fewer tokens than its window (it has cut nothing yet), the tokens it
has seen are exactly its tensors' length. The patch makes the layer read its length there
(`get_seq_length`, and `get_mask_sizes`: the mask's key length and offset), so the past
length stays a dimension of the graph. A graph exported this way is right for pasts shorter
than the window; from the window on, the layer's eager code cuts its tensors, which the
graph does not know. Eager behaviour is unchanged: with a Python int the two are equal.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch

LAYER = "transformers.cache_utils:DynamicSlidingWindowLayer"
METHODS = ("get_seq_length", "get_mask_sizes")
# A zoo entry may say which cache layer classes its model has (the transformers-decode
# entries do): without a sliding one, the patch changes nothing.
CACHE_LAYERS = "cache_layers"


class _Layer(Protocol):
    """What the patched methods read of a DynamicSlidingWindowLayer."""

    is_initialized: bool
    cumulative_length: int
    sliding_window: int
    keys: torch.Tensor


def _layer() -> type | None:
    import importlib

    module, _, name = LAYER.partition(":")
    return getattr(importlib.import_module(module), name, None)


def unavailable() -> str | None:
    try:
        cls = _layer()
    except ImportError as exc:
        return f"transformers does not import: {exc}"
    if cls is None or not all(callable(getattr(cls, m, None)) for m in METHODS):
        return f"this transformers has no {LAYER.replace(':', '.')} with {', '.join(METHODS)}"
    return None


def pointless(metadata: Mapping[str, object]) -> str | None:
    layers = metadata.get(CACHE_LAYERS)
    if not isinstance(layers, Iterable) or any("SlidingWindow" in str(name) for name in layers):
        return None
    return f"the model's cache has no sliding-window layer ({', '.join(map(str, layers))})"


def _below_window(layer: _Layer) -> bool:
    return bool(layer.is_initialized) and layer.cumulative_length < layer.sliding_window


Length = Callable[[_Layer], int]
MaskSizes = Callable[[_Layer, int], tuple[int, int]]


def _patched(original_length: Length, original_mask: MaskSizes) -> tuple[Length, MaskSizes]:
    def get_seq_length(self: _Layer) -> int:
        if _below_window(self):
            return self.keys.shape[-2]
        return original_length(self)

    def get_mask_sizes(self: _Layer, query_length: int) -> tuple[int, int]:
        if _below_window(self):
            return self.keys.shape[-2] + query_length, 0
        return original_mask(self, query_length)

    return get_seq_length, get_mask_sizes


@contextlib.contextmanager
def applied() -> Iterator[None]:
    cls = _layer()
    assert cls is not None  # unavailable() said so before
    saved = {m: cls.__dict__.get(m) for m in METHODS}
    for name, method in zip(METHODS, _patched(*(getattr(cls, m) for m in METHODS)), strict=True):
        setattr(cls, name, method)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                delattr(cls, name)  # it was inherited: remove the override
            else:
                setattr(cls, name, value)

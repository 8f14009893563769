"""The patch registry (harness/exporters/patches/): every patch names what it changes, says where
it cannot apply, and undoes itself; `none` changes nothing. What the patches do to real
exports is tested on the decode zoo (tests/test_transformers_decode.py)."""

from __future__ import annotations

import importlib

import pytest

from harness.exporters import patches


@pytest.mark.parametrize("name", patches.NAMES)
def test_every_patch_says_what_it_does_and_implements_the_interface(name: str) -> None:
    patch = patches.get(name)
    assert patch.description
    if patch.implementation is not None:
        module = importlib.import_module(patch.implementation)
        assert callable(module.unavailable) and callable(module.applied)
        assert module.__doc__ and name in module.__doc__


def test_unknown_patches_are_named_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="unknown patch 'monkey' \\(known: none, "):
        patches.get("monkey")


def test_the_sliding_window_patch_is_undone_even_when_the_export_fails() -> None:
    pytest.importorskip("transformers")
    from transformers.cache_utils import DynamicSlidingWindowLayer as Layer

    before = (Layer.get_seq_length, Layer.get_mask_sizes)
    patch = patches.get("sliding-window")
    assert patch.unavailable() is None
    inside = []
    with pytest.raises(RuntimeError, match="export failed"), patch.applied():  # noqa: PT012
        inside.append((Layer.get_seq_length, Layer.get_mask_sizes))
        raise RuntimeError("export failed")
    assert inside and inside[0] != before
    assert (Layer.get_seq_length, Layer.get_mask_sizes) == before


def test_the_sliding_window_patch_changes_no_eager_answer() -> None:
    """Below the window, the tensors' length is the layer's count; past it, the patch
    defers to the layer's own code."""
    pytest.importorskip("transformers")
    import torch
    from transformers.cache_utils import DynamicSlidingWindowLayer as Layer

    def answers(tokens: int) -> tuple[object, object]:
        layer = Layer(sliding_window=4)
        layer.update(torch.zeros(1, 2, tokens, 8), torch.zeros(1, 2, tokens, 8))
        return layer.get_seq_length(), layer.get_mask_sizes(3)

    plain = [answers(n) for n in (1, 3, 6)]
    with patches.get("sliding-window").applied():
        patched = [answers(n) for n in (1, 3, 6)]
    assert patched == plain
    assert plain[0] == (1, (4, 0)) and plain[2][0] == 6  # past the window: the count


def test_transformers_own_patches_are_applied_and_undone() -> None:
    pytest.importorskip("transformers")
    patch = patches.get("transformers-exporters")
    if patch.unavailable():
        pytest.skip(patch.unavailable() or "")
    import torch

    where = torch.where
    with patch.applied():
        assert torch.where is not where  # transformers' onnx patches swap torch.where
    assert torch.where is where


def test_a_patch_for_layers_the_cache_does_not_have_is_pointless() -> None:
    patch = patches.get("sliding-window")
    gpt2 = {"cache_layers": ["DynamicLayer"]}
    assert patch.pointless(gpt2) == "the model's cache has no sliding-window layer (DynamicLayer)"
    assert patch.pointless({"cache_layers": ["DynamicLayer", "DynamicSlidingWindowLayer"]}) is None
    assert patch.pointless({}) is None, "an entry that does not say may need it"
    assert patches.get("none").pointless(gpt2) is None

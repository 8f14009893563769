"""onnxruntime_genai's Generator as the harness drives it (harness/cell/genai.py): the pad
and end ids it reads from genai_config.json, and a row compared up to the Generator's end
token. The Generator itself runs on real builds in tests/e2e/test_builders.py."""

from __future__ import annotations

import torch

from harness.cell.genai import _pad_and_end, up_to_end


def test_the_pad_id_is_the_configs_else_the_generators_default() -> None:
    assert _pad_and_end({"pad_token_id": 5, "eos_token_id": 2}) == (5, {2})
    # mobius's config names no pad id: the Generator pads with 0 (padding with the end
    # token gave another row's tokens on a real build)
    assert _pad_and_end({"eos_token_id": [2, 7]}) == (0, {2, 7})
    assert _pad_and_end({}) == (0, set())


def test_eager_is_cut_where_the_generator_stopped_a_row() -> None:
    logits = [torch.zeros(3) for _ in range(4)]
    eager = ([5, 2, 9, 9], logits)
    cut = up_to_end(eager, ([5, 2], logits[:2]))
    assert cut[0] == [5, 2] and len(cut[1]) == 2


def test_the_generators_cache_covers_a_window_within_the_context() -> None:
    from harness.cell.genai import _capacity

    window = {"decoder": {"sliding_window": {"window_size": 64}}, "context_length": 128}
    assert _capacity(window, 24) == 64  # a sliding window's cache is at least its window
    assert _capacity(window, 100) == 100
    # a shrunk config's window of 4096 in a context of 128: never past the context
    longer = {"decoder": {"sliding_window": {"window_size": 4096}}, "context_length": 128}
    assert _capacity(longer, 24) == 128
    assert _capacity({}, 24) == 24

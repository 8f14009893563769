"""Encoder-decoder generation token by token (T5, BART, Marian, ...: the decode suite's
seq2seq steps): the encoder once on the source text, then decoder steps from the decoder's
start token, each with the past self-attention cache and the cross-attention cache.

The cell's graph is one decoder step (harness's decode suite: the new decoder tokens, the
encoder's output and mask, the self- and cross-attention cache in; the logits and the
present cache out). Its cross-attention keys and values come from the encoder's side: the
encoder is exported with the cell's exporter too, as `EncoderWithCross`, which returns the
encoder's output and every decoder layer's cross-attention keys and values (what the
model's first decoder step computes from it and keeps in its cache), so that the step
graph is fed what it was traced with. Eager generates with the model's own forward and
cache, the encoder's output computed once, as `generate` does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from harness.cell import generation

# The decoder step graph's names (the decode suite's): the self-attention cache under
# `.decoder.`, the cross-attention cache under `.encoder.`.
PAST, PRESENT = "past_key_values.", "present."


def start(lm: torch.nn.Module) -> torch.Tensor:
    """The decoder's first input: its start token, [1, 1]."""
    config: Any = lm.config
    token = getattr(config, "decoder_start_token_id", None)
    if token is None:
        token = getattr(config, "pad_token_id", None) or 0
    return torch.tensor([[int(token)]], dtype=torch.int64)


def cross_names(layers: int) -> list[str]:
    return [f"{PRESENT}{i}.encoder.{kv}" for i in range(layers) for kv in ("key", "value")]


class EncoderWithCross(torch.nn.Module):
    """The encoder on the source text, then the decoder once on its start token with an
    empty cache: the encoder's output and each decoder layer's cross-attention keys and
    values, the second half of the cache every later step reads."""

    def __init__(self, lm: torch.nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        from transformers.cache_utils import DynamicCache, EncoderDecoderCache

        lm: Any = self.lm
        hidden = lm.get_encoder()(input_ids=input_ids, attention_mask=attention_mask)[0]
        first = torch.full((input_ids.shape[0], 1), int(start(lm)[0, 0]), dtype=torch.int64)
        empty = EncoderDecoderCache(DynamicCache(), DynamicCache())
        out = lm(
            encoder_outputs=encoder_output(hidden),
            attention_mask=attention_mask,
            decoder_input_ids=first,
            use_cache=True,
            **{generation.cache_argument(lm): empty},
        )
        cross = generation.cache_of(out).cross_attention_cache
        return (hidden, *[t for layer in cross.layers for t in (layer.keys, layer.values)])


def encoder_output(hidden: torch.Tensor) -> Any:
    """The encoder's output as the model takes it back (some read `.last_hidden_state`,
    T5Gemma among them, which a bare tuple lacks)."""
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=hidden)


def layers(lm: torch.nn.Module, source: torch.Tensor) -> int:
    """The decoder's layers as its cache holds them (a config names them many ways: an
    EncoderDecoderModel's are its decoder sub-config's)."""
    with torch.no_grad():
        found = EncoderWithCross(lm)(source, torch.ones_like(source))
    return (len(found) - 1) // 2


def eager_step(lm: torch.nn.Module, source: torch.Tensor) -> generation.Step:
    """The model's forward on the decoder's new tokens with its own cache, the encoder's
    output computed once."""
    mask = torch.ones_like(source)
    lm_any: Any = lm
    with torch.no_grad():
        hidden = lm_any.get_encoder()(input_ids=source, attention_mask=mask)[0]
    key = generation.cache_argument(lm)
    state: dict[str, Any] = {"cache": None}

    def step(new: torch.Tensor, past: int) -> torch.Tensor:
        with torch.no_grad():
            out = lm(
                decoder_input_ids=new,
                encoder_outputs=encoder_output(hidden),
                attention_mask=mask,
                use_cache=True,
                **{key: state["cache"]},
            )
        state["cache"] = generation.cache_of(out)
        logits: torch.Tensor = out.logits[0, -1]
        return logits

    return step


def graph_step(
    run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
    input_names: Sequence[str],
    output_names: Sequence[str],
    encoded: Mapping[str, np.ndarray],
    empty_self: Mapping[str, np.ndarray],
    source_mask: np.ndarray,
) -> generation.Step:
    """The decoder step graph, fed the encoder graph's output and cross-attention cache
    (`encoded`: `encoder_hidden_states`, `present.N.encoder.*`) and its own present as the
    next step's past, from an empty self-attention cache."""
    state = {PAST + k.removeprefix(PRESENT): v for k, v in encoded.items() if k.startswith(PRESENT)}
    state |= dict(empty_self)
    fixed = {
        "encoder_hidden_states": encoded["encoder_hidden_states"],
        "encoder_attention_mask": source_mask,
    }

    def step(new: torch.Tensor, past: int) -> torch.Tensor:
        feeds = {"input_ids": new.numpy(), **fixed, **state}
        outputs = dict(zip(output_names, run({n: feeds[n] for n in input_names}), strict=True))
        state.update(
            {PAST + n.removeprefix(PRESENT): v for n, v in outputs.items() if n.startswith(PRESENT)}
        )
        return torch.from_numpy(np.asarray(outputs["logits"]))[0, -1]

    return step


def component_step(
    runners: Mapping[str, Any], traced: Mapping[str, Mapping[str, Any]], encoder_output: Any
) -> generation.Step:
    """transformers' `prefill` then `decode` components of an encoder-decoder through its
    own runners, on the kwargs each was traced with, the encoder's output the one its
    exported encoder gave, the decoder's new tokens, and the cache the runner rebuilt (a
    fresh copy of the prefill's empty cache first)."""
    state: dict[str, Any] = {"cache": None}

    def step(new: torch.Tensor, past: int) -> torch.Tensor:
        name = "prefill" if state["cache"] is None else "decode"
        kwargs = {**traced[name], "decoder_input_ids": new, "encoder_outputs": encoder_output}
        key = generation.cache_key(kwargs)
        if key is not None:
            fresh = copy.deepcopy(traced["prefill"][key])
            kwargs[key] = state["cache"] if state["cache"] is not None else fresh
        out = runners[name](**kwargs)
        state["cache"] = generation.cache_of(out)
        logits: torch.Tensor = out.logits[0, -1]
        return logits

    return step

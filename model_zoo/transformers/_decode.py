"""The model a `transformers-decode` entry exports: a type's causal-LM (or seq2seq-LM) head
built from the shrunk config with its KV cache on, behind a forward that takes what a
deployment passes for one generation step (`input_ids`, `attention_mask`, `position_ids`
where the model takes them, and the past cache as the installed transformers builds it:
a `DynamicCache`, an `EncoderDecoderCache`, ...) and returns the logits and the present
cache's tensors, flattened.

The cache goes through the exporter as the object it is, flattened by transformers' own
pytree registrations (`transformers.exporters.exporter_dynamo.register_cache_pytrees_for_model`,
what transformers' exporters call before `torch.export`); nothing else is changed. The
graph's inputs and outputs are named as optimum names them: `past_key_values.0.key`, ...,
`logits`, `present.0.key`, ... (`past_key_values.0.decoder.key` and `.encoder.key` for a
seq2seq model's self- and cross-attention).

Inputs at any size come from a real prefill: the model run in eager on `past` random
tokens gives the cache (a cache holds more than its tensors, e.g. a sliding layer's token
count, so slicing one would not give a valid cache of another length).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch
import torch.utils._pytree as pytree

from harness.cell.generation import cache_argument, cache_of
from model_zoo.transformers._build import model_class, offline, start_decoding_as_checkpoints_do
from model_zoo.transformers._inputs import token_ids
from model_zoo.transformers._shrink import shrunk_config

CAUSAL, SEQ2SEQ = "causal-lm", "seq2seq-lm"
MAPPINGS = {
    CAUSAL: "MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
    SEQ2SEQ: "MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES",
}
# The example shape the graph is exported at: every dynamic dimension above 1 and distinct,
# so that torch.export specialises none of them by accident (it fixes sizes 0 and 1).
EXAMPLE = {"batch": 2, "sequence": 3, "past": 5, "encoder": 8}


def head_types(head: str) -> list[str]:
    """The model types the installed transformers registers for a head."""
    from transformers.models.auto import modeling_auto

    return sorted(getattr(modeling_auto, MAPPINGS[head]))


def head_class(model_type: str, head: str) -> str:
    from transformers.models.auto import modeling_auto

    name = getattr(modeling_auto, MAPPINGS[head])[model_type]
    return name if isinstance(name, str) else name[0]


def decode_config(model_type: str, cls: Any, published: str | None = None) -> Any:
    """The shrunk config the head class takes, or the published one of the real-size entry
    `published` (a composite config's text part where the class is built from that), with
    the KV cache on and, for encoder models with an optional decoder mode (BERT-like heads),
    in that mode."""
    config = shrunk_config(model_type) if published is None else published_config(published)
    wanted = getattr(cls, "config_class", None)
    if wanted is not None and not isinstance(config, wanted) and hasattr(config, "get_text_config"):
        text = config.get_text_config()
        config = text if isinstance(text, wanted) else config
    for part in (config, *(getattr(config, k, None) for k in ("text_config", "decoder"))):
        if part is not None and hasattr(part, "use_cache"):
            part.use_cache = True
    if hasattr(config, "is_decoder") and not getattr(config, "is_encoder_decoder", False):
        config.is_decoder = True
    return config


def published_config(name: str) -> Any:
    """The config of the real-size entry `name` (model_zoo/real_size/: a checkpoint's
    published config.json, written down)."""
    from model_zoo.real_size._build import config_of
    from model_zoo.real_size.models import entry

    return config_of(entry(name))


def build_lm(model_type: str, head: str, published: str | None = None) -> torch.nn.Module:
    """The head class from the decode config (or a real-size entry's published one), random
    weights (seeded by the caller), eval."""
    offline()
    import transformers

    transformers.logging.set_verbosity_error()
    cls = model_class(head_class(model_type, head))
    model = cls(decode_config(model_type, cls, published)).eval()
    start_decoding_as_checkpoints_do(model)
    return model


def register_caches(model: torch.nn.Module) -> None:
    """transformers' own pytree registrations of its cache classes (and the model's own
    cache classes), as its exporters do before `torch.export`."""
    from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model

    register_cache_pytrees_for_model(model)


class DecodeStep(torch.nn.Module):
    """One generation step of a causal LM: the new tokens and the past cache in, the logits
    and the present cache's tensors (flattened, in the cache's own order) out."""

    def __init__(self, model: torch.nn.Module, *, position_ids: bool, mask_past: bool) -> None:
        super().__init__()
        self.model = model
        self.cache_argument = cache_argument(model)
        self.takes_position_ids = position_ids
        # The mask covers the past and the new tokens (attention), or only the new ones (a
        # recurrent state has no past positions to mask).
        self.mask_past = mask_past

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        position_ids: torch.Tensor | None = None,
        past_key_values: Any = None,
    ) -> tuple[torch.Tensor, ...]:
        extra = {"position_ids": position_ids} if self.takes_position_ids else {}
        out = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            use_cache=True,
            **{self.cache_argument: past_key_values},
            **extra,
        )
        return (out.logits, *cache_tensors(cache_of(out)))


class Seq2SeqDecodeStep(torch.nn.Module):
    """One decoder step of a seq2seq LM: the new decoder tokens, the encoder's output and
    mask, and the past self- and cross-attention cache in; logits and present cache out."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model
        self.cache_argument = cache_argument(model)

    def forward(
        self,
        input_ids: torch.Tensor,
        encoder_attention_mask: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        past_key_values: Any = None,
    ) -> tuple[torch.Tensor, ...]:
        out = self.model(
            decoder_input_ids=input_ids,
            attention_mask=encoder_attention_mask,
            encoder_outputs=encoder_output(encoder_hidden_states),
            use_cache=True,
            **{self.cache_argument: past_key_values},
        )
        return (out.logits, *cache_tensors(cache_of(out)))


def cache_tensors(cache: Any) -> list[torch.Tensor]:
    """The cache's tensors in its flattening order (a traced cache may also hold symbolic
    ints, such as a sliding layer's token count: those are no graph outputs)."""
    return [t for t in pytree.tree_leaves(cache) if isinstance(t, torch.Tensor)]


def encoder_output(hidden: torch.Tensor) -> Any:
    """The encoder's output as the model takes it back (some read `.last_hidden_state`)."""
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=hidden)


def is_encoder_decoder(model: torch.nn.Module) -> bool:
    return bool(getattr(getattr(model, "config", None), "is_encoder_decoder", False))


def takes_position_ids(model: torch.nn.Module) -> bool:
    return "position_ids" in inspect.signature(model.forward).parameters


def decode_step(model: torch.nn.Module, head: str, *, mask_past: bool = True) -> torch.nn.Module:
    """The exported module around a built LM (its cache classes registered first). A
    seq2seq-LM head that is no encoder-decoder (a speech or audio LM that decodes text on
    its own) takes a decoder's step."""
    register_caches(model)
    if head == SEQ2SEQ and is_encoder_decoder(model):
        return Seq2SeqDecodeStep(model).eval()
    return DecodeStep(model, position_ids=takes_position_ids(model), mask_past=mask_past).eval()


# -- inputs ---------------------------------------------------------------------------------------


def inputs_at(step: torch.nn.Module, sizes: Mapping[str, int]) -> tuple[Any, ...]:
    """The step's inputs at these sizes of its dynamic dimensions (batch, sequence new
    tokens, past cached ones, encoder length): random token ids, a cache from a real
    prefill of `past` tokens (an empty one for 0), an attention mask of ones, and the
    position ids that follow the past (call under a seed)."""
    batch, new, past = sizes["batch"], sizes["sequence"], sizes["past"]
    model: Any = step.model
    config = model.config
    if isinstance(step, Seq2SeqDecodeStep):
        encoder_ids = token_ids(config, (batch, sizes.get("encoder", EXAMPLE["encoder"])))
        mask = torch.ones_like(encoder_ids)
        with torch.no_grad():
            hidden = model.get_encoder()(input_ids=encoder_ids, attention_mask=mask)[0]
        cache = _prefill(model, token_ids(config, (batch, past)), encoder=(hidden, mask))
        return (token_ids(config, (batch, new)), mask, hidden, cache)
    cache = _prefill(model, token_ids(config, (batch, past)))
    mask = torch.ones(batch, past + new if step.mask_past else new, dtype=torch.int64)
    positions = torch.arange(past, past + new).expand(batch, new).contiguous()
    if not step.takes_position_ids:
        positions = None  # a model without position ids: no such graph input
    return (token_ids(config, (batch, new)), mask, positions, cache)


def _prefill(
    model: Any, ids: torch.Tensor, *, encoder: tuple[torch.Tensor, torch.Tensor] | None = None
) -> Any:
    """The cache after running `ids` through the model; for no ids, the cache of one token
    with its tensors cut to none (the cache of a prompt not begun)."""
    if ids.shape[1] == 0:
        return _emptied(_prefill(model, ids.new_zeros(ids.shape[0], 1), encoder=encoder))
    with torch.no_grad():
        if encoder is None:
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=True)
        else:
            hidden, mask = encoder
            out = model(
                decoder_input_ids=ids,
                attention_mask=mask,
                encoder_outputs=encoder_output(hidden),
                use_cache=True,
            )
    cache = cache_of(out)
    if cache is None:
        raise ValueError(f"{type(model).__name__} returns no KV cache with use_cache=True")
    return cache


def _emptied(cache: Any) -> Any:
    """The cache with its one token removed by transformers' own `crop` (a sliding layer's
    token count goes back to 0 with it); a cache of recurrent states cannot be cropped."""
    cache.crop(-1)
    return cache


# -- names ----------------------------------------------------------------------------------------


def leaf_names(cache: Any, prefix: str) -> list[str]:
    """A name for each tensor of the cache, in its flattening order, as optimum names them:
    `{prefix}.{layer}.key` / `.value`, `.decoder.` / `.encoder.` inside an encoder-decoder
    cache, and a layer's other tensors by their attribute (`.conv_states`)."""
    paths: dict[int, tuple[Any, ...]] = {}
    _collect(cache, (), paths, depth=0)
    names = []
    for leaf in cache_tensors(cache):
        path = paths.get(id(leaf))
        names.append(_name(prefix, path) if path is not None else f"{prefix}.{len(names)}")
    return _unique(names)


def _collect(
    value: Any, path: tuple[Any, ...], found: dict[int, tuple[Any, ...]], depth: int
) -> None:
    if depth > 6:
        return
    if isinstance(value, torch.Tensor):
        found.setdefault(id(value), path)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _collect(v, (*path, i), found, depth + 1)
    elif isinstance(value, dict):
        for k, v in value.items():
            _collect(v, (*path, k), found, depth + 1)
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for k, v in vars(value).items():
            _collect(v, (*path, k), found, depth + 1)


_PARTS = {
    "keys": "key",
    "values": "value",
    "self_attention_cache": "decoder",
    "cross_attention_cache": "encoder",
}


def _name(prefix: str, path: tuple[Any, ...]) -> str:
    """('self_attention_cache', 'layers', 0, 'keys') -> prefix.0.decoder.key: the layer
    index first, then the cache part, then the tensor."""
    parts = [str(p).lstrip("_") for p in path if p != "layers"]
    index = [p for p in parts if p.isdigit()]
    rest = [_PARTS.get(p, p) for p in parts if not p.isdigit()]
    return ".".join([prefix, *index[:1], *rest, *index[1:]])


def _unique(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}.{seen[name] - 1}")
    return out

"""Generation, token by token: a generative cell's exported graph(s) generate NEW_TOKENS
tokens greedily from a fixed prompt in ONNX Runtime, and eager PyTorch does the same on the
same model; the record says how many leading tokens agree, the first that differs and the
largest logits error at each step up to it (`Generation`).

One loop serves every side (`greedy`): a step takes the new tokens and the length of the
past and returns the last position's logits, keeping its own cache. Eager's step is the
language model's forward with its cache (what `generate(do_sample=False)` runs, without
logits processors, for exactly NEW_TOKENS steps); a one-graph step (the decode suite's
graphs: the past cache's tensors in, the present's out) feeds its outputs back as its next
inputs; a component step (transformers' exporter) runs `prefill` (a multimodal model's
`language_model` and `lm_head`), then `decode`, on the kwargs the components were traced
with, the cache rebuilt by transformers' own runner.

A first difference where eager's two best logits are closer than ORT's logits error at that
step is a tie of random weights, not the export's fault: recorded as such (`tie_gap`).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from harness.cell import dynamic
from harness.cell.numerics import DEFAULT_TOLERANCE
from harness.cell.ort import OrtRunner
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure, stage
from harness.store.measures import Generation
from harness.store.records import Cell, Dtype, Measurements
from harness.zoo import ModelSpec
from harness.zoo.spec import SEED

NEW_TOKENS = 16
PROMPT_TOKENS = 8


class TokensDiffer(Exception):
    """ORT's graph(s) generate other tokens than eager (a numerics failure)."""


# new tokens [1, n], the past's length -> the logits of the last position [vocab]
Step = Callable[[torch.Tensor, int], torch.Tensor]
Greedy = tuple[list[int], list[torch.Tensor]]  # the tokens picked, the logits picked from


def prompt(lm: torch.nn.Module) -> torch.Tensor:
    """PROMPT_TOKENS token ids [1, n], the same for a model every time: drawn from the
    vocabulary less the ids the config names as special (padding, images, ...)."""
    config: Any = lm.config
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    special = {
        v
        for c in (config, text)
        for k, v in vars(c).items()
        if isinstance(v, int) and k.endswith(("_token_id", "_token_index", "_id"))
    }
    allowed = [i for i in range(int(text.vocab_size)) if i not in special]
    picks = torch.randint(0, len(allowed), (1, PROMPT_TOKENS), generator=_generator())
    return torch.tensor([[allowed[i] for i in picks[0].tolist()]], dtype=torch.int64)


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(SEED)


def greedy(
    step: Step, ids: torch.Tensor, new_tokens: int = NEW_TOKENS
) -> tuple[list[int], list[torch.Tensor]]:
    """The tokens greedy decoding picks after `ids`, and the logits it picked them from."""
    tokens: list[int] = []
    logits: list[torch.Tensor] = []
    new, past = ids, 0
    for _ in range(new_tokens):
        last = step(new, past).detach().float().cpu().reshape(-1)
        token = int(torch.argmax(last))
        tokens.append(token)
        logits.append(last)
        past += new.shape[1]
        new = torch.tensor([[token]], dtype=ids.dtype)
    return tokens, logits


def compare(eager: Greedy, ort: Greedy, tolerance: tuple[float, float]) -> Generation:
    """ORT's generation against eager's: agreement, the first difference and whether it
    was a tie: ORT's logits there within `tolerance` (rtol, atol) of eager's, and eager's
    two best closer than twice ORT's error (each may have moved by that error)."""
    (want, want_logits), (got, got_logits) = eager, ort
    rtol, atol = tolerance
    errors: list[float] = []
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        errors.append(_max_abs(want_logits[i], got_logits[i]))
        if w != g:
            close = errors[-1] <= atol + rtol * float(want_logits[i].abs().max())
            gap = _top_two_gap(want_logits[i])
            tie = gap if close and gap <= 2 * errors[-1] else None
            return Generation(len(want), i, i, errors, tie, want, got)
    return Generation(len(want), len(want), None, errors, None, want, got)


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    return float((a - b).abs().max()) if a.numel() else 0.0


def _top_two_gap(logits: torch.Tensor) -> float:
    top = torch.topk(logits, 2).values
    return float(top[0] - top[1])


def mismatch_text(g: Generation, eager: list[int], ort: list[int]) -> str:
    """The first line says what kind of failure it is (no numbers: the signature groups
    it); the next lines say where."""
    i = g.first_difference
    assert i is not None
    return (
        "generated tokens differ from eager's\n"
        f"first at new token {i} of {g.new_tokens} (eager {eager[i]}, ORT {ort[i]});"
        f" {g.agree} agree; logits max_abs {g.max_logits_abs[i]:.3g} there"
    )


# -- steps ----------------------------------------------------------------------------------------


def eager_step(lm: torch.nn.Module, *, mask_past: bool = True) -> Step:
    """The language model's forward with its own cache, as `generate` calls it."""
    params = inspect.signature(lm.forward).parameters
    key = cache_argument(lm)
    device = next(lm.parameters(), torch.empty(0)).device
    state: dict[str, Any] = {"cache": None}

    def step(new: torch.Tensor, past: int) -> torch.Tensor:
        kwargs = _token_kwargs(new, past, mask_past=mask_past, positions="position_ids" in params)
        kwargs = {k: v.to(device) for k, v in kwargs.items()}  # a CUDA cell's model
        with torch.no_grad():
            out = lm(**kwargs, **{key: state["cache"]}, use_cache=True)
        state["cache"] = cache_of(out)
        logits: torch.Tensor = out.logits[0, -1]
        return logits

    return step


def _token_kwargs(
    new: torch.Tensor, past: int, *, mask_past: bool, positions: bool
) -> dict[str, torch.Tensor]:
    n = new.shape[1]
    kwargs = {
        "input_ids": new,
        "attention_mask": torch.ones(1, past + n if mask_past else n, dtype=torch.int64),
    }
    if positions:
        kwargs["position_ids"] = torch.arange(past, past + n, dtype=torch.int64).unsqueeze(0)
    return kwargs


def graph_step(
    run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
    input_names: Sequence[str],
    output_names: Sequence[str],
    empty_past: Mapping[str, torch.Tensor],
    *,
    mask_past: bool = True,
) -> Step:
    """One graph of a generation step (the decode suite's: `input_ids`, `attention_mask`,
    `position_ids`, `past_key_values.*` in; `logits`, `present.*` out): each step's present
    is the next one's past, starting from the empty cache's tensors."""
    past_of = {n: "past_key_values." + n.removeprefix("present.") for n in output_names}
    state = {k: v.cpu().numpy() for k, v in empty_past.items()}
    positions = "position_ids" in input_names

    def step(new: torch.Tensor, past: int) -> torch.Tensor:
        tokens = _token_kwargs(new, past, mask_past=mask_past, positions=positions)
        feeds = {**{k: v.numpy() for k, v in tokens.items()}, **state}
        outputs = dict(zip(output_names, run({n: feeds[n] for n in input_names}), strict=True))
        state.update({past_of[n]: v for n, v in outputs.items() if n.startswith("present.")})
        return torch.from_numpy(np.asarray(outputs["logits"]))[0, -1]

    return step


def component_step(runners: Mapping[str, Any], traced: Mapping[str, Mapping[str, Any]]) -> Step:
    """transformers' `prefill` then `decode` components through transformers' own runners,
    on the kwargs each was traced with (a fresh copy of the prefill's empty cache first,
    then the cache the runner rebuilt from the graph's outputs). A multimodal model's
    prefill is its `language_model` then its `lm_head` (`split_prefill`)."""
    state: dict[str, Any] = {"cache": None}

    def step(new: torch.Tensor, past: int) -> torch.Tensor:
        if state["cache"] is None and "prefill" not in runners:
            first, state["cache"] = split_prefill(runners, traced, new)
            return first
        name = "prefill" if state["cache"] is None else "decode"
        traced_kwargs = traced[name]
        key = cache_key(traced_kwargs)
        kwargs = _token_kwargs(new, past, mask_past=True, positions=True)
        kwargs = {k: v for k, v in kwargs.items() if k in traced_kwargs}
        if key is not None:
            cache = state["cache"] or copy.deepcopy(traced["prefill"][key])
            kwargs[key] = cache
        out = runners[name](**kwargs)
        state["cache"] = cache_of(out)
        logits: torch.Tensor = out.logits[0, -1]
        return logits

    return step


def split_prefill(
    runners: Mapping[str, Any], traced: Mapping[str, Mapping[str, Any]], prompt_ids: torch.Tensor
) -> tuple[torch.Tensor, Any]:
    """A multimodal model's first step: its `language_model` on the kwargs traced from the
    prompt (the prompt's embeddings, which transformers leaves to the caller to assemble,
    and a fresh copy of the empty cache), then its `lm_head` on its hidden states.
    Returns the last position's logits and the language model's cache."""
    missing = sorted({"language_model", "lm_head", "decode"} - set(runners))
    if missing:
        raise KeyError(f"no component {missing[0]!r} among {sorted(runners)} to generate with")
    kwargs = copy.deepcopy(dict(traced["language_model"]))
    embeds = kwargs.get("inputs_embeds")
    if embeds is None or embeds.shape[1] != prompt_ids.shape[-1]:
        raise ValueError("the language model was not traced on the prompt's embeddings")
    out = runners["language_model"](**kwargs)
    logits = runners["lm_head"](input=out.last_hidden_state)
    return torch.as_tensor(logits)[0, -1], cache_of(out)


def cache_of(output: Any) -> Any:
    """A model output's cache (`cache` since transformers 5.2x, `past_key_values` before)."""
    return next(
        (v for k in ("cache", "past_key_values") if (v := getattr(output, k, None)) is not None),
        None,
    )


def cache_key(kwargs: Mapping[str, Any]) -> str | None:
    return next((k for k in ("cache", "past_key_values") if k in kwargs), None)


def cache_argument(model: torch.nn.Module) -> str:
    """The model's forward's cache argument (`cache` since transformers 5.2x, where
    `past_key_values` is deprecated and goes in 5.40; `past_key_values` before)."""
    return cache_key(inspect.signature(model.forward).parameters) or "past_key_values"


# -- the cell's check -----------------------------------------------------------------------------


def recipe(spec: ModelSpec, cell: Cell) -> Mapping[str, Any] | None:
    """How the entry generates (its `generation` metadata: whether the mask covers the
    past), where the cell checks generation: dynamic cells (a static graph takes one cache
    length) not in bfloat16 (numpy, which feeds ORT here, has none)."""
    found = spec.metadata.get("generation")
    if not isinstance(found, Mapping) or not cell.dynamic or cell.dtype is Dtype.BFLOAT16:
        return None
    return found


def language_model(model: torch.nn.Module) -> torch.nn.Module:
    """The language model an entry wraps (a decode step holds it as `model`)."""
    inner = getattr(model, "model", None)
    return inner if isinstance(inner, torch.nn.Module) else model


def reference(model: torch.nn.Module, how: Mapping[str, Any]) -> tuple[torch.Tensor, Greedy]:
    """The prompt and eager's greedy generation from it: a failure is eager's (the
    reference stage), not the export's."""
    lm = language_model(model)
    with stage("reference"):
        ids = prompt(lm)
        return ids, greedy(eager_step(lm, mask_past=bool(how.get("mask_past", True))), ids)


def graph_tokens(
    runner: OrtRunner,
    model: torch.nn.Module,
    spec: ModelSpec,
    inputs: Inputs,
    ids: torch.Tensor,
    how: Mapping[str, Any],
) -> Greedy:
    """Greedy generation through a one-step graph in ORT, from the entry's empty cache."""
    with stage("build"):
        empty = dynamic.inputs_at(spec, model, inputs, {"batch": 1, "sequence": 1, "past": 0})
    named = dict(zip(empty.names(), empty.leaves(), strict=True))
    past = {k: v for k, v in named.items() if k.startswith("past_key_values.")}
    run = lambda feeds: runner.session.run(runner.output_names, feeds)  # noqa: E731
    step = graph_step(
        run,
        runner.input_names,
        runner.output_names,
        past,
        mask_past=bool(how.get("mask_past", True)),
    )
    with stage("ort_run"):
        return greedy(step, ids)


def require_same(
    eager: Greedy, ort: Greedy, tolerance: tuple[float, float] | None, m: Measurements
) -> None:
    """The comparison into the record (`tolerance`: the entry's, else the default); tokens
    that differ (not by a tie) fail the cell at numerics."""
    found = compare(eager, ort, tolerance or DEFAULT_TOLERANCE)
    m.numerics = replace(m.numerics, generation=found)
    if not found.ok:
        raise StageFailure("numerics", TokensDiffer(mismatch_text(found, eager[0], ort[0])))

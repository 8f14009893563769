"""Generation on a batch, as users send one: prompts of different lengths padded into one
batch, NEW_TOKENS greedy tokens for each row, eager's against the exported graph's
(harness.cell.generation has the single prompt).

The batch is padded as a decoder's tokenizer pads for generation: on the left, the
attention mask 0 on the pads, the position ids counting each row's real tokens (pads at 1),
what transformers' `generate` feeds. A graph whose attention reads only each row's length
from the mask (ORT's GroupQueryAttention, in the model builders' graphs) is fed the same
rows padded on the right, the layout that op takes; the record says which (`padding`).

One loop serves both sides (`greedy`): a step takes the new tokens, the mask over the past
and the new tokens and their positions, and returns the logits of every new position
(`[batch, new, vocab]`), keeping its own cache.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from harness.cell import generation
from harness.store.measures import Generation

LENGTHS = (8, 3, 5)  # the batch's prompts: the single check's prompt first, then shorter ones
LEFT, RIGHT = "left", "right"

# ids [batch, new], mask [batch, past + new], positions [batch, new] -> logits [batch, new, vocab]
Step = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def prompts(lm: torch.nn.Module) -> list[list[int]]:
    """The batch's prompts: the single check's prompt, then its first tokens reversed
    (rows of other lengths and contents; the same every time)."""
    first = generation.prompt(lm)[0].tolist()
    return [first[:n] if i == 0 else first[:n][::-1] for i, n in enumerate(LENGTHS)]


def padded(
    rows: Sequence[Sequence[int]], side: str, pad: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows as one batch of ids and its attention mask, padded on `side`."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.int64)
    mask = torch.zeros((len(rows), width), dtype=torch.int64)
    for i, row in enumerate(rows):
        start = width - len(row) if side == LEFT else 0
        ids[i, start : start + len(row)] = torch.tensor(row, dtype=torch.int64)
        mask[i, start : start + len(row)] = 1
    return ids, mask


def positions_of(mask: torch.Tensor) -> torch.Tensor:
    """transformers' positions for a left-padded batch: real tokens count from 0, pads 1."""
    positions = mask.cumsum(-1) - 1
    return positions.masked_fill(mask == 0, 1)


def greedy(
    step: Step, rows: Sequence[Sequence[int]], side: str, new_tokens: int = generation.NEW_TOKENS
) -> list[generation.Greedy]:
    """Each row's greedy tokens and the logits picked from, the batch padded on `side`."""
    ids, mask = padded(rows, side)
    lengths = torch.tensor([len(r) for r in rows])
    width = ids.shape[1]
    positions = positions_of(mask) if side == LEFT else torch.arange(width).expand_as(ids)
    logits = step(ids, mask, positions)
    last = logits[:, -1] if side == LEFT else logits[torch.arange(len(rows)), lengths - 1]
    picked: list[list[int]] = [[] for _ in rows]
    seen: list[list[torch.Tensor]] = [[] for _ in rows]
    for t in range(new_tokens):
        last = last.detach().float().cpu()
        tokens = last.argmax(-1)
        for i in range(len(rows)):
            picked[i].append(int(tokens[i]))
            seen[i].append(last[i])
        if t == new_tokens - 1:
            break
        if side == LEFT:
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            positions = (mask.sum(-1, keepdim=True) - 1).to(torch.int64)
        else:  # each row's real tokens then its pads: the new token is the row's next
            filled = lengths + t + 1
            mask = (torch.arange(width + t + 1) < filled[:, None]).to(torch.int64)
            positions = (filled - 1)[:, None]
        last = step(tokens[:, None].to(torch.int64), mask, positions)[:, -1]
    return list(zip(picked, seen, strict=True))


def compare(
    eager: Sequence[generation.Greedy],
    ort: Sequence[generation.Greedy],
    tolerance: tuple[float, float],
    *,
    lengths: list[int],
    side: str,
) -> Generation:
    """The rows compared one by one (generation.compare); the record holds the first row
    that differs (not by a tie), else the first row, with the batch's facts."""
    found = [generation.compare(e, o, tolerance) for e, o in zip(eager, ort, strict=True)]
    row = next((i for i, g in enumerate(found) if not g.ok), 0)
    chosen = found[row]
    return Generation(
        chosen.new_tokens,
        chosen.agree,
        chosen.first_difference,
        chosen.max_logits_abs,
        chosen.tie_gap,
        chosen.eager_tokens,
        chosen.ort_tokens,
        lengths=lengths,
        padding=side,
        row=row,
    )


# -- steps ----------------------------------------------------------------------------------------


def eager_step(lm: torch.nn.Module) -> Step:
    """The language model's forward with its own cache, as `generate` calls it on a
    padded batch (the mask, and the positions where the model takes them)."""
    params = inspect.signature(lm.forward).parameters
    key = generation.cache_argument(lm)
    device = next(lm.parameters(), torch.empty(0)).device
    state: dict[str, Any] = {"cache": None}

    def step(ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        kwargs = {"input_ids": ids, "attention_mask": mask}
        if "position_ids" in params:
            kwargs["position_ids"] = positions
        kwargs = {k: v.to(device) for k, v in kwargs.items()}
        with torch.no_grad():
            out = lm(**kwargs, **{key: state["cache"]}, use_cache=True)
        state["cache"] = generation.cache_of(out)
        logits: torch.Tensor = out.logits
        return logits

    return step


def graph_step(
    run: Callable[[dict[str, np.ndarray]], Sequence[np.ndarray]],
    input_names: Sequence[str],
    output_names: Sequence[str],
    empty_past: Mapping[str, torch.Tensor],
) -> Step:
    """A one-step graph (`input_ids`, `attention_mask`, `position_ids` where it takes them,
    `past_key_values.*` in; `logits`, `present.*` out), each step's present fed back as the
    next one's past, from the batch's empty cache."""
    past_of = {n: "past_key_values." + n.removeprefix("present.") for n in output_names}
    state = {k: v.cpu().numpy() for k, v in empty_past.items()}

    def step(ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        tokens = {"input_ids": ids, "attention_mask": mask, "position_ids": positions}
        feeds = {**{k: v.numpy() for k, v in tokens.items()}, **state}
        outputs = dict(zip(output_names, run({n: feeds[n] for n in input_names}), strict=True))
        state.update({past_of[n]: v for n, v in outputs.items() if n.startswith("present.")})
        return torch.from_numpy(np.asarray(outputs["logits"]))

    return step


def padding_for(op_types: set[str]) -> str:
    """Right for a graph whose attention is ORT's GroupQueryAttention (it reads each row's
    length from the mask and never its zeros), else left."""
    return RIGHT if "GroupQueryAttention" in op_types else LEFT

"""Greedy generation through onnxruntime_genai's `Generator`, as ONNX Runtime GenAI serves a
model builder's graph: the folder the builder wrote (its `genai_config.json` beside the
graph), the prompts' token ids appended, NEW_TOKENS tokens generated one by one, their
logits read at each step.

A batch is padded on the right with the config's pad id (the Generator derives each row's
mask from the pad ids). The Generator stops a row at the config's end-of-sequence token,
where eager (no logits processors) goes on: a row is compared up to that token. A sliding
window needs a cache at least as long as its window: `max_length` is the longer of the two,
within the model's context.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.cell import generation

CONFIG = "genai_config.json"


def greedy(
    folder: Path, rows: Sequence[Sequence[int]], new_tokens: int = generation.NEW_TOKENS
) -> list[generation.Greedy]:
    """Each row's tokens and the logits picked from, through the Generator (imported here,
    in the cell's process: the runtime, not the builder)."""
    import onnxruntime_genai as og

    config = json.loads((folder / CONFIG).read_text())["model"]
    pad, eos = _pad_and_end(config)
    if any(pad in row for row in rows):
        raise ValueError(f"a prompt holds the pad id {pad}, which the Generator reads as padding")
    width = max(len(r) for r in rows)
    ids = np.full((len(rows), width), pad, dtype=np.int32)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(
        max_length=_capacity(config, width + new_tokens), do_sample=False, batch_size=len(rows)
    )
    generator = og.Generator(model, params)
    generator.append_tokens(ids)
    return _steps(generator, len(rows), new_tokens, eos)


def _capacity(config: dict[str, Any], needed: int) -> int:
    """The cache the Generator allocates (`max_length`): what the prompt and the new tokens
    need, or a sliding window's length where longer (its GroupQueryAttention refuses a
    shorter cache), but never past the model's context (the Generator refuses that; a
    shrunk config may keep a window longer than its context: ORT then says so)."""
    window = int((config.get("decoder", {}).get("sliding_window") or {}).get("window_size", 0))
    context = int(config.get("context_length") or needed)
    return max(needed, min(window, context))


def _steps(generator: Any, batch: int, new_tokens: int, eos: set[int]) -> list[generation.Greedy]:
    picked: list[list[int]] = [[] for _ in range(batch)]
    seen: list[list[torch.Tensor]] = [[] for _ in range(batch)]
    ended = [False] * batch
    for _ in range(new_tokens):
        if generator.is_done():
            break
        logits = np.asarray(generator.get_logits(), dtype=np.float32).reshape(batch, -1)
        generator.generate_next_token()
        tokens = np.asarray(generator.get_next_tokens()).reshape(batch)
        for i in range(batch):
            if ended[i]:
                continue
            picked[i].append(int(tokens[i]))
            seen[i].append(torch.from_numpy(logits[i].copy()))
            ended[i] = int(tokens[i]) in eos
    return list(zip(picked, seen, strict=True))


def _pad_and_end(config: dict[str, Any]) -> tuple[int, set[int]]:
    """The config's pad id (the Generator's default, 0, where it names none: mobius's
    config does not, and a batch padded with the end token gave other tokens) and its
    end-of-sequence ids."""
    eos = config.get("eos_token_id")
    listed = eos if isinstance(eos, list) else [] if eos is None else [eos]
    return int(config.get("pad_token_id") or 0), {int(e) for e in listed}


def up_to_end(eager: generation.Greedy, ort: generation.Greedy) -> generation.Greedy:
    """Eager's generation cut to the Generator's length (it stops a row at its end token)."""
    tokens, logits = eager
    return tokens[: len(ort[0])], logits[: len(ort[0])]

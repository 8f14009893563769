"""Shared pieces of the transformers adapter (not an entry: the leading underscore).

transformers is imported only inside `build`, so these files import without it; where it
is missing the harness records the cells as skipped (`requires`, REQUIRES below).
Models are built from tiny configs with random weights: nothing is downloaded.
"""

from __future__ import annotations

import torch

VOCAB = 1000
# What building any transformers model imports (the hf suite's and the transformers suite's).
# Each cell runs in a child forked from its worker's zygote, which imports an entry's
# `requires` once (harness.cell.isolation): with
# only "transformers" (a lazy package) every child imported ~1 000 modules itself (torch's
# distributed and dynamo packages, sympy, transformers' generation and integrations),
# about 1.3 s a cell.
REQUIRES = (
    "transformers",
    "transformers.modeling_utils",
    "transformers.generation.utils",
    "transformers.masking_utils",
    "transformers.modeling_layers",
    "transformers.processing_utils",
)

# Small enough for a 2-core CI runner, big enough to exercise every block:
# hidden 64, 2 layers, 4 heads, FFN 128.
TINY = {
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 128,
}


def token_inputs(batch: int = 2, sequence: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """input_ids and an int64 attention_mask with padding at the end of the second row."""
    input_ids = torch.randint(0, VOCAB, (batch, sequence))
    attention_mask = torch.ones(batch, sequence, dtype=torch.int64)
    attention_mask[1, sequence * 3 // 4 :] = 0
    return input_ids, attention_mask


TOKEN_DYNAMIC_SHAPES = ({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"})

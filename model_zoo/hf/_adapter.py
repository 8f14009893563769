"""Shared pieces of the transformers adapter (not an entry: the leading underscore).

transformers is imported only inside `build`, so these files import without it; where it
is missing the harness records the cells as skipped (`requires`, REQUIRES below).
Models are built from tiny configs with random weights: nothing is downloaded.
"""

from __future__ import annotations

import torch

# What building a transformers model imports, for `requires` (one list for every
# transformers entry, in a module that imports neither torch nor transformers).
from model_zoo.transformers._inventory import REQUIRES as REQUIRES

VOCAB = 1000

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

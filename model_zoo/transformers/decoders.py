"""Every causal-LM and seq2seq-LM head of the installed transformers' registry as it is
shipped: one generation step with a KV cache (family `transformers-decode`, named
`hf.<model_type>.decode` and `hf.<model_type>.decode-seq2seq`; the `transformers-decode`
suite; needs the hf extra).

Read from the committed inventory beside this file (`_decode_inventory.json`, written by
`harness zoo refresh transformers-decode`): importing this file builds nothing. A
head the probe could not build or run a step with a cache is an entry too, whose cells are
skipped with the reason. Known export failures come from `_decode_expected.csv`.
"""

from __future__ import annotations

from harness.zoo import expected_file
from model_zoo.transformers._decode_inventory import (
    DECODE_EXPECTED,
    DECODE_INVENTORY,
    decode_specs,
)
from model_zoo.transformers._inventory import read_inventory

_EXPECTED = expected_file.read(DECODE_EXPECTED).rows if DECODE_EXPECTED.is_file() else ()
SPECS = (
    decode_specs(read_inventory(DECODE_INVENTORY), _EXPECTED) if DECODE_INVENTORY.is_file() else []
)

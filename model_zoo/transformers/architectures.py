"""Every transformers model type of the installed registry, from its shrunk default config
(family `transformers`, named `hf.<model_type>`; the `transformers` suite; needs the hf extra).

Read from the committed inventory beside this file (`_inventory.json`, written by
`harness zoo refresh transformers`): importing this file builds nothing. A model
type the probe could not build or run in eager is an entry too, whose cells are skipped
with the reason. Known export failures come from `_expected.csv` (the grammar of
expected/status.csv).
"""

from __future__ import annotations

from harness.zoo import expected_file
from model_zoo.transformers._inventory import EXPECTED, INVENTORY, read_inventory, specs

_EXPECTED = expected_file.read(EXPECTED).rows if EXPECTED.is_file() else ()
SPECS = specs(read_inventory(INVENTORY), _EXPECTED) if INVENTORY.is_file() else []

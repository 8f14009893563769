"""One-op models: every ATen op overload the zoo's models use, alone, with the shapes and
dtypes its first call really had (family `ops`, named by the overload: `aten.conv2d.default`).

The ops and their argument templates come from `_inventory.json` beside this file, written
by `harness zoo refresh ops` from the zoo's captured graphs (harness/zoo/generated/ops.py).
"""

from __future__ import annotations

from pathlib import Path

from harness.zoo.generated.one_op import specs_from_inventory
from harness.zoo.generated.ops import read_inventory

INVENTORY = Path(__file__).with_name("_inventory.json")

SPECS = specs_from_inventory(read_inventory(INVENTORY)) if INVENTORY.is_file() else []

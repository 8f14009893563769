"""torch's OpInfo database as zoo entries: one per (OpInfo, dtype), family `opinfo`, named
`opinfo.<name>[-<variant>].<dtype>` (the real names are in each entry's metadata). Each
entry runs its OpInfo's CPU samples (up to HARNESS_OPINFO_MAX_SAMPLES, default 10, spread
evenly over them), every sample exported, checked, run in ONNX Runtime and compared alone.

The entries come from `_inventory.json` beside this file (`harness zoo refresh
opinfo`); known failures, with reasons, from `_expected.csv`
(`harness zoo expected RUN_DIR`). op_db is imported only by a cell's build.
"""

from __future__ import annotations

from pathlib import Path

from harness.zoo.generated.opinfo_specs import specs

HERE = Path(__file__).parent

SPECS = specs(HERE / "_inventory.json", HERE / "_expected.csv")

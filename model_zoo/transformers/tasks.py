"""Every task head of the installed transformers' registry as it is deployed: one entry per
model type and head class of the `MODEL_FOR_<TASK>_MAPPING_NAMES` mappings (family
`transformers-tasks`, named `hf.<model_type>.<task>`, the task in its metadata and tags:
`--models 'task:question-answering'`; the `transformers-tasks` suite; needs the hf extra).

Read from the committed inventory beside this file (`_tasks_inventory.json`, written by
`harness zoo refresh transformers-tasks`): importing this file builds nothing. A head the
probe could not build or run in eager is an entry too, whose cells are skipped with the
reason. Known export failures come from `_tasks_expected.csv`.
"""

from __future__ import annotations

from harness.zoo import expected_file
from model_zoo.transformers._inventory import read_inventory
from model_zoo.transformers._tasks import TASKS_EXPECTED, TASKS_INVENTORY, task_specs

_EXPECTED = expected_file.read(TASKS_EXPECTED).rows if TASKS_EXPECTED.is_file() else ()
SPECS = task_specs(read_inventory(TASKS_INVENTORY), _EXPECTED) if TASKS_INVENTORY.is_file() else []

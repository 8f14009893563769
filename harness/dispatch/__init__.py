"""Dispatch: cells as Ray tasks, records back in completion order.

- `session`: start or join Ray, stop it, what the cluster is.
- `remote`: what runs on the workers (the cell's task, the start board, the version probe,
  the paired timing) and what a task's Ray error says.
- `driver`: the loops that submit tasks and collect their results (`run_tasks`,
  `time_pairs`).
- `policy`: what the driver decides (slots, the order cells go in, clocks, whether a lost
  task lost its node or crashed, retries, cells no node can run), without Ray.
- `cluster`: the cluster and a variant's environment as plain data, without Ray.

Only `session`, `remote` and `driver` import ray (ruff's banned-api and tests/test_layout.py
keep it so). Nothing is imported here, so `policy` and `cluster` load without Ray.
"""

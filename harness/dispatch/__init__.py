"""Dispatch: cells as Ray tasks, records back in completion order.

- `session`: start or join Ray, stop it, what the cluster is.
- `remote`: what runs on the workers (the cell's task, the start board, the version probe,
  the paired timing) and what a task's Ray error says.
- `driver`: `run_tasks` (the driver's loop over Ray, through `RayTasks`) and `time_pairs`.
- `loop`: the driver's loop, reaching Ray through the small `Tasks` interface (the tests
  drive it with a stand-in), without Ray.
- `policy`: what the driver decides (slots, the order cells go in, the start board and
  clocks, what it waits for, whether a lost task lost its node or crashed, retries, cells
  no node can run, what counts as completed), without Ray.
- `flight`: a submitted cell and its clock, and the start board's state, without Ray.
- `cluster`: the cluster and a variant's environment as plain data, without Ray.

Only `session`, `remote` and `driver` import ray (ruff's banned-api and tests/test_layout.py
keep it so). Nothing is imported here, so `policy`, `flight`, `loop` and `cluster` load
without Ray.
"""

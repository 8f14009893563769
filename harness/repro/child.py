"""One cell's minimization in a fresh process: `python -m harness.repro.child JOB RESULT`.

The driver starts one per cell (runner.py) and kills it past the time bound; what a cell's
model does to this process (custom ops, patched exporter functions) ends with it.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    import numpy as np
    import torch

    from harness.repro.job import Job
    from harness.repro.minimize import minimize

    job_path, result_path = Path(argv[0]), Path(argv[1])
    torch.set_num_threads(1)  # several minimizers share the driver's machine
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    summary = minimize(Job.from_json(job_path.read_text()))
    tmp = result_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(summary.to_dict()))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

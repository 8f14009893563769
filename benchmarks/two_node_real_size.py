"""The real-size suite on a local two-node Ray cluster of unequal memory (issue 47): a head
with 1 CPU and 16 GiB of Ray memory, a node with 1 CPU and 6 GiB, on this machine; each
cell asks Ray for the memory its weights need, so the large ones must land on the head.

    python -m benchmarks.two_node_real_size DIR [harness run's other flags]
"""

from __future__ import annotations

import subprocess
import sys
import time

from ray.cluster_utils import Cluster

GIB = 1024**3


def main() -> None:
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "memory": 16 * GIB})
    cluster.add_node(num_cpus=1, memory=6 * GIB)
    cluster.wait_for_nodes()
    start = time.time()
    try:
        rc = subprocess.call(
            ["harness", "run", "--suite", "real-size", "--address", cluster.address,
             "--out", sys.argv[1], *sys.argv[2:]]
        )  # fmt: skip
    finally:
        cluster.shutdown()
    print(f"rc {rc}, wall {time.time() - start:.1f} s", flush=True)
    sys.exit(rc)


if __name__ == "__main__":
    main()

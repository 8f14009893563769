"""How fast this host multiplies matrices at one thread, in ORT and in torch: the figure
that tells two hosts of one CPU brand string apart when their latencies disagree
(benchmarks/README.md, "Real size": 90 GFLOP/s in ORT where BERT-base took 314 ms a call).

    python -m benchmarks.gemm_rate [--size 1024] [--calls 10]

Prints one JSON object: the median GFLOP/s of `calls` float32 MatMuls of size x size, in
an ORT session of one intra-op thread and in torch at one thread, and the CPU's identity.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import numpy as np
import onnxruntime as ort
import torch
from onnx import TensorProto, helper

from harness import stats
from harness.store.environment import hardware


def gflops(call: Callable[[], object], size: int, calls: int) -> float:
    call()
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        seconds.append(time.perf_counter() - start)
    return round(2 * size**3 / stats.median(seconds) / 1e9, 1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--calls", type=int, default=10)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal((a.size, a.size), dtype=np.float32) for _ in range(2))
    side = [a.size, a.size]
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "gemm",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, side) for n in ("x", "w")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, side)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    torch.set_num_threads(1)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    found = {
        "ort_gflops": gflops(lambda: session.run(None, {"x": x, "w": w}), a.size, a.calls),
        "torch_gflops": gflops(lambda: tx @ tw, a.size, a.calls),
        "cpu": hardware()["cpu"],
        "cpu_id": hardware()["cpu_id"],
    }
    print(json.dumps(found))


if __name__ == "__main__":
    main()

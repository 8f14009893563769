"""Why a real-size cell's ORT p50 reads higher in the harness than in a plain loop: one
process, one exported graph, ORT timed five ways in turn, repeated (ABCDE ABCDE).

- `plain_spin`, `plain_nospin`: back-to-back calls, as a plain script times them, with
  ORT's intra-op spinning on (ORT's default) and off;
- `interleaved_nospin`: alternating with eager, as the harness's latency stage times them
  (`harness.cell.timing.time_interleaved`, spinning off: harness/runtime/latency.py);
- `interleaved_spin`: the same with spinning on;
- `interleaved_spin_stop`: the same, spinning on within a call and stopped as it returns
  (`session.force_spinning_stop`), so no idle pool spins while eager runs.

Eager's median beside each interleaved way is printed too: a pool that spins on after its
call takes eager's cores.

    python -m benchmarks.ort_beside_eager --model real.qwen3_0_6b --repeats 2

Prints a line per way and repeat (samples, median, min, max in ms) and, last, one JSON
object of each way's medians.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import onnxruntime as ort
import torch

from benchmarks.plain_real_size import built
from harness.cell.timing import time_interleaved
from harness.store.protocol import Protocol

WAYS = (
    "plain_spin",
    "plain_nospin",
    "interleaved_nospin",
    "interleaved_spin",
    "interleaved_spin_stop",
)
# The real-size suite's protocol (suites/real-size.toml), one loop's cap
PROTOCOL = Protocol(
    warmup_min_iters=1, warmup_max_s=2.0, min_iters=5, min_time_s=0.5,
    max_iters=300, max_time_s=15.0, target_interval=0.03,
)  # fmt: skip


def _session(path: Path, threads: int, way: str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    spinning = "_spin" in way
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    options.add_session_config_entry("session.force_spinning_stop", "1" if "stop" in way else "0")
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _back_to_back(call: Callable[[], object], iters: int) -> list[float]:
    call()
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        call()
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="real.qwen3_0_6b")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--iters", type=int, default=10, help="back-to-back calls of a plain way")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    model, args = built(a.model)

    def eager() -> None:
        with torch.inference_mode():
            model(*args)

    medians: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        with torch.no_grad():
            torch.onnx.export(model, args, str(path), dynamo=True, opset_version=18)
        for repeat in range(a.repeats):
            for way in WAYS:
                session = _session(path, a.threads, way)
                feeds = {
                    i.name: t.numpy() for i, t in zip(session.get_inputs(), args, strict=False)
                }

                def call(s: ort.InferenceSession = session, f: dict = feeds) -> object:  # type: ignore[type-arg]
                    return s.run(None, f)

                eager_ms: list[float] = [math.nan]
                if way.startswith("plain"):
                    samples = _back_to_back(call, a.iters)
                else:
                    samples, eager_ms = time_interleaved(call, eager, PROTOCOL)
                medians[way].append(round(statistics.median(samples), 1))
                print(way, repeat, len(samples), medians[way][-1], round(min(samples), 1),
                      round(max(samples), 1), "eager", round(statistics.median(eager_ms), 1),
                      flush=True)  # fmt: skip
                del session, call
                gc.collect()
    print(json.dumps(medians))


if __name__ == "__main__":
    main()

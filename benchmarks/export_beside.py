"""A real-size export alone and beside another cell's work (issue 47: could a cell export
while other cells build their models and run them eagerly, rather than with the node to
itself?). Each round exports the model the plain way (benchmarks/plain_real_size.py, a
fresh process) alone, then again while a second process builds another real-size model
and runs it eagerly at 1 thread in a loop, as a cell's build and reference stages do.

    python benchmarks/export_beside.py --model real.qwen3_0_6b --exporter dynamo \
        --beside real.bert_base --rounds 3

Prints each export's line, then the ratio beside / alone of each round and their median.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

PLAIN = Path(__file__).with_name("plain_real_size.py")
SETTLE_S = 8.0  # the busy process builds its first model before the export starts


def busy(model: str) -> None:
    """Build `model` and run it eagerly twice, at 1 thread, until killed."""
    import torch

    from harness.zoo.discovery import discover

    torch.set_num_threads(1)
    spec = discover().get(model)
    while True:
        built = spec.build().eval()
        with torch.inference_mode():
            for _ in range(2):
                built(*spec.example_inputs())
        del built


def export_s(model: str, exporter: str) -> float:
    argv = ["--model", model, "--exporter", exporter, "--ort-iters", "1", "--warm-up"]
    done = subprocess.run(
        [sys.executable, str(PLAIN), *argv], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout.splitlines()[-1])
    print(json.dumps(found), flush=True)
    return float(found["export_s"])


def beside(model: str, exporter: str, other: str) -> float:
    worker = subprocess.Popen([sys.executable, __file__, "--busy", other])
    try:
        time.sleep(SETTLE_S)
        return export_s(model, exporter)
    finally:
        worker.kill()
        worker.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="real.qwen3_0_6b")
    parser.add_argument("--exporter", default="dynamo", choices=("dynamo", "torchscript"))
    parser.add_argument("--beside", default="real.bert_base")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.busy:
        busy(args.busy)
        return
    ratios = []
    for _ in range(args.rounds):
        alone = export_s(args.model, args.exporter)
        ratios.append(beside(args.model, args.exporter, args.beside) / alone)
    print(
        json.dumps({"ratios": [round(r, 3) for r in ratios], "median": statistics.median(ratios)})
    )


if __name__ == "__main__":
    main()

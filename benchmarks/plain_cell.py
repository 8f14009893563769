"""One cell done the plain way, in a fresh Python process: what an engineer would write by
hand. Build the zoo model, export with torch.onnx.export, check with onnx.checker, run in
ONNX Runtime against eager, time the same number of iterations as the harness did.

    python benchmarks/plain_cell.py --source FILE --model NAME --exporter dynamo --opset 18 \
        --ort-iters 20 --eager-iters 20 [--threads 1]

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

START = time.perf_counter()

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

from harness.zoo.discovery import load_source  # noqa: E402  (only to build the very same model)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--source", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", required=True, choices=["dynamo", "torchscript"])
    p.add_argument("--opset", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ort-iters", type=int, default=20)
    p.add_argument("--eager-iters", type=int, default=20)
    p.add_argument("--dynamic", action="store_true", help="dynamic batch; verify again at batch 1")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    spec = next(s for s in load_source(a.source) if s.name == a.model)
    torch.manual_seed(0)
    model = spec.build().eval()
    torch.manual_seed(0)
    args = tuple(spec.example_inputs())
    with torch.no_grad():
        expected = model(*args)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    out = {"model": a.model, "exporter": a.exporter, "opset": a.opset}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.onnx"
        t0 = time.perf_counter()
        try:
            _export(model, args, path, a, spec.dynamic_shapes)
        except Exception as exc:
            out.update(
                status="export_failed", error=str(exc)[:200], wall_s=time.perf_counter() - START
            )
            print(json.dumps(out))
            return
        out["export_s"] = time.perf_counter() - t0
        try:
            onnx.checker.check_model(str(path))
            options = ort.SessionOptions()
            options.intra_op_num_threads = a.threads
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), args, strict=False)}
            got = session.run(None, feeds)
        except Exception as exc:
            out.update(
                status="check_or_ort_failed",
                error=str(exc)[:200],
                wall_s=time.perf_counter() - START,
            )
            print(json.dumps(out))
            return
        ok = all(
            np.allclose(g, e.numpy(), rtol=1e-4, atol=1e-5)
            for g, e in zip(got, expected, strict=False)
        )
        out["status"] = "ok" if ok else "numerics_mismatch"
        if a.dynamic and ok:
            out["status"] = _second_shape(session, model, args)
        out["ort_p50_ms"] = _p50(lambda: session.run(None, feeds), a.ort_iters)
        session = None  # drop ORT and its thread pool before eager is timed
        with torch.inference_mode():
            out["eager_p50_ms"] = _p50(lambda: model(*args), a.eager_iters)
    out["wall_s"] = time.perf_counter() - START
    print(json.dumps(out))


def _export(model, args, path: Path, a: argparse.Namespace, dynamic_shapes) -> None:  # type: ignore[no-untyped-def]
    names = [f"input_{i}" for i in range(len(args))]
    if a.exporter == "dynamo":
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=True,
            opset_version=a.opset,
            input_names=names,
            dynamic_shapes=dynamic_shapes if a.dynamic else None,
        )
    else:
        axes = (
            {n: dict(d) for n, d in zip(names, dynamic_shapes or (), strict=False) if d}
            if a.dynamic
            else None
        )
        torch.onnx.export(
            model,
            args,
            str(path),
            dynamo=False,
            opset_version=a.opset,
            input_names=names,
            dynamic_axes=axes,
        )


def _second_shape(session, model, args) -> str:  # type: ignore[no-untyped-def]
    small = tuple(t[:1] for t in args)
    with torch.no_grad():
        expected = model(*small)
    expected = [expected] if isinstance(expected, torch.Tensor) else list(expected)
    try:
        got = session.run(
            None, {i.name: t.numpy() for i, t in zip(session.get_inputs(), small, strict=False)}
        )
    except Exception:
        return "dynamic_mismatch"
    ok = all(
        np.allclose(g, e.numpy(), rtol=1e-4, atol=1e-5) for g, e in zip(got, expected, strict=False)
    )
    return "ok" if ok else "dynamic_mismatch"


def _p50(fn, iters: int) -> float:  # type: ignore[no-untyped-def]
    for _ in range(3):
        fn()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return statistics.median(samples)


if __name__ == "__main__":
    sys.exit(main())

"""Synthetic runs for the report and plot tests (imported by the other tests/report/ files).

`mixed_records()` is a small fixed run with every kind of outcome: ok, export failures
sharing a signature (with artifacts), numerics and dynamic mismatches, ORT failure with
no latency, xfail, timeout, crash, skipped, not attempted, an opset saved above the one
requested, ATen op coverage on dynamo cells. `realistic_records()` is a seeded full-size
run (12 models x 3 exporters x 3 opsets) for looking at the plots; `large_records()` a
suite of 450 models for the report at scale.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import asdict, dataclass, field, is_dataclass
from pathlib import Path
from typing import Any

from harness.store.manifest import Manifest
from harness.store.records import Cell, Latency, OutputCheck, Record
from harness.store.rundir import RecordWriter, write_manifest
from harness.store.status import Stage
from tests.fixtures_compare import changed, measurements

RUN_ID = "2025-06-01T02-00-00-mixed"
BASELINE_ID = "2025-05-31T02-00-00-base"
GOLDEN = Path(__file__).parent / "golden"

CONV = {"aten.conv2d.default": 5, "aten.relu.default": 7, "aten.linear.default": 3}
ATTN = {"aten.linear.default": 12, "aten.softmax.int": 2, "aten.layer_norm.default": 5}
SDPA = "aten.scaled_dot_product_attention.default"


def lat(p50: float, spread: float = 0.08, n: int = 20) -> Latency:
    """Deterministic samples spread evenly around p50 (+-spread)."""
    samples = [p50 * (1 + spread * (2 * i / (n - 1) - 1)) for i in range(n)]
    return Latency.from_samples(samples)


def cell(model: str, exporter: str, opset: int, *, dynamic: bool = False) -> Cell:
    family = {"alexnet": "vision", "whisper_enc": "audio"}.get(model, "nlp")
    return Cell(model, exporter, opset, dynamic=dynamic, family=family)


def ok(
    c: Cell,
    *,
    export_s: float,
    rss: float,
    ort: float | None,
    eager: float | None,
    run_id: str = RUN_ID,
    **measured: Any,
) -> Record:
    m = measurements(
        opset_actual=measured.pop("opset_actual", c.opset),
        export_s=export_s,
        export_phases={
            "capture": export_s * 0.6,
            "translate": export_s * 0.3,
            "save": export_s * 0.1,
        },
        export_peak_rss_mb=rss,
        ort_latency_ms=lat(ort) if ort is not None else None,
        eager_latency_ms=lat(eager) if eager is not None else None,
        **measured,
    )
    return Record.finished(c, run_id, m)


def failed(
    c: Cell, stage: str, error: BaseException, *, status: str | None = None, **measured: Any
) -> Record:
    artifacts = measured.pop("artifacts", {})
    m = measurements(artifacts=artifacts, **measured)
    return Record.finished(
        c, RUN_ID, m, status=status or Stage(stage).failure_status, stage=stage, error=error
    )


def _artifacts(c: Cell) -> dict[str, str]:
    folder = f"artifacts/{c.cell_id}"
    return {"report": f"{folder}/onnx_export_report.md", "repro": f"{folder}/repro.py"}


def _alexnet() -> list[Record]:
    return [
        ok(
            cell("alexnet", "dynamo", 17),
            export_s=2.1,
            rss=310,
            ort=4.0,
            eager=6.0,
            aten_ops=CONV,
            opset_actual=18,
        ),
        ok(cell("alexnet", "dynamo", 18), export_s=2.0, rss=300, ort=3.8, eager=6.1, aten_ops=CONV),
        ok(cell("alexnet", "torchscript", 17), export_s=0.9, rss=120, ort=4.4, eager=6.0),
        ok(cell("alexnet", "torchscript", 18), export_s=0.95, rss=125, ort=4.2, eager=6.0),
    ]


def _bert() -> list[Record]:
    records = []
    for opset in (17, 18):
        c = cell("bert_tiny", "dynamo", opset)
        error = TypeError(f"no translation for {SDPA} at /tmp/build/{opset}/fx.py line 12")
        records.append(
            failed(
                c,
                "translate",
                error,
                aten_ops={**ATTN, SDPA: 2},
                unsupported_ops=[SDPA],
                artifacts=_artifacts(c),
            )
        )
    records.append(
        ok(cell("bert_tiny", "torchscript", 17), export_s=1.5, rss=210, ort=0.9, eager=2.5)
    )
    numerics = [OutputCheck("logits", 0.5, 0.2, 0.1, 1e-4, 1e-5, False)]
    records.append(
        failed(
            cell("bert_tiny", "torchscript", 18),
            "numerics",
            AssertionError("logits: max abs diff 0.5 > atol 1e-05"),
            opset_actual=18,
            export_s=1.6,
            export_peak_rss_mb=215.0,
            numerics=numerics,
            ort_latency_ms=lat(0.85),
            eager_latency_ms=lat(2.5),
        )
    )
    return records


def _gpt2() -> list[Record]:
    reason = "data-dependent control flow in generate()"
    return [
        failed(
            cell("gpt2_small", "dynamo", 17),
            "latency",
            RuntimeError("ORT run failed: invalid input shape"),
            opset_actual=18,
            export_s=8.5,
            export_peak_rss_mb=1500.0,
        ),
        ok(cell("gpt2_small", "dynamo", 18), export_s=8.0, rss=1450, ort=12.0, eager=20.0),
        failed(
            cell("gpt2_small", "torchscript", 17), "capture", RuntimeError(reason), status="xfail"
        ),
        failed(
            cell("gpt2_small", "torchscript", 18), "capture", RuntimeError(reason), status="xfail"
        ),
        ok(
            cell("gpt2_small", "dynamo", 17, dynamic=True),
            export_s=9.0,
            rss=1600,
            ort=14.0,
            eager=21.0,
        ),
        failed(
            cell("gpt2_small", "dynamo", 18, dynamic=True),
            "dynamic",
            AssertionError("output 0 at batch 1 differs"),
            export_s=9.5,
            export_peak_rss_mb=1620.0,
        ),
        Record.without_run(
            cell("gpt2_small", "torchscript", 17, dynamic=True),
            RUN_ID,
            status="timeout",
            reason="cell exceeded 600 s",
        ),
        Record.without_run(
            cell("gpt2_small", "torchscript", 18, dynamic=True),
            RUN_ID,
            status="crashed",
            reason="worker died: SIGSEGV",
        ),
    ]


def _whisper() -> list[Record]:
    return [
        Record.without_run(
            cell("whisper_enc", "dynamo", 17), RUN_ID, status="skipped", reason="needs opset 18"
        ),
        ok(
            cell("whisper_enc", "dynamo", 18),
            export_s=30.0,
            rss=2900,
            ort=150.0,
            eager=140.0,
            aten_ops={"aten.conv1d.default": 2, **ATTN},
        ),
        ok(cell("whisper_enc", "torchscript", 17), export_s=12.0, rss=900, ort=160.0, eager=140.0),
        Record.without_run(
            cell("whisper_enc", "torchscript", 18),
            RUN_ID,
            status="not_attempted",
            reason="run interrupted",
        ),
    ]


def mixed_records() -> list[Record]:
    return _alexnet() + _bert() + _gpt2() + _whisper()


def baseline_records() -> list[Record]:
    """The same cells a night earlier: alexnet dynamo@18 was 30% faster, torchscript@17 20% slower."""
    factor = {("alexnet", "dynamo", 18): 1 / 1.3, ("alexnet", "torchscript", 17): 1.2}
    out = []
    for r in mixed_records():
        f = factor.get((r.model, r.exporter, r.opset), 1.0)
        lat_ms = lat(r.ort.latency.p50 * f) if r.ort.latency else None
        out.append(changed(r, run_id=BASELINE_ID, ort_latency_ms=lat_ms))
    return out


def manifest(run_id: str = RUN_ID, **changes: Any) -> dict[str, Any]:
    m: dict[str, Any] = {
        "schema": 1,
        "run_id": run_id,
        "started": "2025-06-01T02:00:00",
        "finished": "2025-06-01T02:41:07",
        "command": ["harness", "run", "--suite", "mixed", "--threads", "2"],
        "suite": "mixed",
        "harness": {"version": "0.1.0", "git_sha": "abc1234"},
        "versions": {
            "base": {
                "python": "3.11.2",
                "torch": "2.9.0",
                "onnx": "1.17.0",
                "onnxscript": "0.5.4",
                "onnxruntime": "1.20.1",
                "ray": "2.40.0",
            }
        },
        "hardware": {"cpu": "AMD EPYC 7B13", "cores": 16, "memory_gb": 125.7, "gpus": []},
        "settings": {
            "threads": 2,
            "timeout_s": 600,
            "protocol": {"min_iters": 20, "min_time_s": 1.0},
        },
        "cells": 20,
        "matrix": "20 cells = 4 models x 2 exporters (dynamo, torchscript) x opsets 17, 18 x 1 device (cpu) x static + dynamic",
    }
    m.update(changes)
    return m


def typed_manifest(run_id: str = RUN_ID, **changes: Any) -> Manifest:
    """`manifest(...)` as the readers see it."""
    return Manifest.from_dict(manifest(run_id, **changes))


def write_run(run_dir: Path, records: list[Record], run_manifest: Manifest | None = None) -> Path:
    write_manifest(
        run_dir, run_manifest or typed_manifest(records[0].run_id if records else RUN_ID)
    )
    with RecordWriter(run_dir) as writer:
        for r in records:
            writer.write(r)
    return run_dir


# -- history ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """Shaped like harness.history.db.HistoryRun."""

    run_id: str
    started: str
    manifest: Manifest
    records: list[Record] = field(default_factory=list)


def history_runs() -> list[Run]:
    """Six nights; torch moves to 2.10 on night 4, where alexnet dynamo@18 gets 40% slower."""
    runs = []
    for night in range(6):
        torch = "2.9.0" if night < 3 else "2.10.0"
        run_id = f"2025-06-0{night + 1}T02-00-00"
        slow = 1.4 if night >= 3 else 1.0
        records = [
            ok(
                cell("alexnet", "dynamo", 18),
                export_s=2.0,
                rss=300,
                ort=3.8 * slow + 0.01 * night,
                eager=6.0,
                run_id=run_id,
            ),
            ok(
                cell("bert_tiny", "torchscript", 17),
                export_s=1.5,
                rss=210,
                ort=0.9 - 0.01 * night,
                eager=2.5,
                run_id=run_id,
            ),
            failed(cell("gpt2_small", "dynamo", 18), "translate", TypeError("x")).with_changes(
                run_id=run_id
            )
            if night == 2
            else ok(
                cell("gpt2_small", "dynamo", 18),
                export_s=8.0,
                rss=1450,
                ort=12.0,
                eager=20.0,
                run_id=run_id,
            ),
        ]
        m = manifest(run_id, started=f"2025-06-0{night + 1}T02:00:00")
        m["versions"]["base"]["torch"] = torch
        runs.append(Run(run_id, m["started"], Manifest.from_dict(m), records))
    return runs


# -- a full-size run for looking at the plots ----------------------------------------------------

MODELS = {
    "alexnet": ("vision", 40.0, 2.0), "resnet18": ("vision", 8.0, 1.5), "resnet50": ("vision", 25.0, 3.0),
    "mobilenet_v3_small": ("vision", 1.2, 2.5), "vit_b_16": ("vision", 60.0, 6.0), "convnext_tiny": ("vision", 30.0, 4.0),
    "bert_tiny": ("nlp", 0.9, 2.0), "distilbert": ("nlp", 9.0, 5.0), "gpt2_small": ("nlp", 14.0, 8.0),
    "t5_small_encoder": ("nlp", 6.0, 6.0), "whisper_tiny_encoder": ("audio", 20.0, 7.0),
    "wav2vec2_base": ("audio", 45.0, 9.0),
}  # fmt: skip
EXPORTER_FACTOR = {
    "dynamo": (1.0, 3.0, 1.6),
    "torchscript": (1.05, 1.0, 1.0),
    "torchscript-script": (1.1, 1.3, 1.1),
}


def _realistic_cell(rng: random.Random, c: Cell, ort_ms: float, export_s: float) -> Record:
    roll = rng.random()
    if c.exporter == "torchscript-script" and c.family == "nlp":
        return failed(
            c,
            "capture",
            RuntimeError(
                "Python builtin <built-in method> is currently not supported in Torchscript"
            ),
            status="xfail",
        )
    if roll < 0.06:
        return failed(
            c,
            "translate",
            TypeError(f"no translation for aten.{rng.choice(['roll', 'stft', 'unfold'])}.default"),
            artifacts=_artifacts(c),
        )
    if roll < 0.09:
        return failed(
            c,
            "numerics",
            AssertionError("max abs diff 3e-3 > atol 1e-5"),
            export_s=export_s,
            ort_latency_ms=lat(ort_ms),
        )
    if roll < 0.10:
        return Record.without_run(c, RUN_ID, status="timeout", reason="cell exceeded 600 s")
    if roll < 0.11:
        return Record.without_run(c, RUN_ID, status="crashed", reason="worker died: SIGSEGV")
    aten = (
        {f"aten.op{k}.default": 1 for k in range(rng.randint(5, 25))}
        if c.exporter == "dynamo"
        else None
    )
    actual = 18 if c.exporter == "dynamo" and c.opset == 17 else c.opset
    return ok(
        c,
        export_s=export_s,
        rss=export_s * 90,
        ort=ort_ms,
        eager=ort_ms * rng.uniform(0.9, 2.5),
        aten_ops=aten,
        opset_actual=actual,
    )


def realistic_records(seed: int = 0) -> list[Record]:
    rng = random.Random(seed)
    records = []
    for model, (family, ort_ms, export_s) in MODELS.items():
        for exporter, (lat_f, exp_f, _) in EXPORTER_FACTOR.items():
            for opset in (17, 18, 20):
                for dynamic in (False, True) if family == "nlp" else (False,):
                    c = Cell(model, exporter, opset, dynamic=dynamic, family=family)
                    jitter = rng.uniform(0.9, 1.1) * (0.95 if opset == 20 else 1.0)
                    records.append(
                        _realistic_cell(
                            rng,
                            c,
                            ort_ms * lat_f * jitter,
                            export_s * exp_f * rng.uniform(0.9, 1.1),
                        )
                    )
    return records


# -- a suite of hundreds of models, for the report at scale ---------------------------------------


def large_records(models: int = 450, seed: int = 1) -> list[Record]:
    """`models` models x 2 exporters at opset 18; about 1 cell in 12 fails, dynamo cells
    name a few of 200 ATen ops each."""
    rng = random.Random(seed)
    records = []
    for i in range(models):
        for exporter in ("dynamo", "torchscript"):
            c = Cell(f"model_{i:03d}", exporter, 18, family="vision")
            ops = {f"aten.op{k}.default": 1 for k in rng.sample(range(200), 5)}
            roll = rng.random()
            if roll < 0.05:
                op = f"aten.op{i % 7}.default"
                error = TypeError(f"no translation for {op}")
                records.append(failed(c, "translate", error, aten_ops=ops, unsupported_ops=[op]))
            elif roll < 0.08:
                error = AssertionError("max abs diff 3e-3 > atol 1e-5")
                records.append(failed(c, "numerics", error, export_s=1.0, aten_ops=ops))
            else:
                ort = rng.uniform(0.5, 50.0)
                records.append(
                    ok(
                        c,
                        export_s=rng.uniform(0.5, 30.0),
                        rss=rng.uniform(50, 3000),
                        ort=ort,
                        eager=ort * rng.uniform(0.8, 2.5),
                        aten_ops=ops if exporter == "dynamo" else None,
                    )
                )
    return records


# -- golden files -------------------------------------------------------------------------------


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def as_json(data: Any) -> Any:
    """A plot's data as JSON-ready values, floats to 6 significant digits."""
    return _rounded(asdict(data) if is_dataclass(data) else data)  # type: ignore[arg-type]


def check_golden(name: str, actual: Any) -> None:
    """Compare with tests/report/golden/<name>; `UPDATE_GOLDEN=1 pytest ...` rewrites it on purpose."""
    path = GOLDEN / name
    text = (
        actual
        if isinstance(actual, str)
        else json.dumps(actual, indent=1, ensure_ascii=False) + "\n"
    )
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"{path} is missing; create it with UPDATE_GOLDEN=1"
    assert text == path.read_text(encoding="utf-8"), (
        f"{path} differs; rerun with UPDATE_GOLDEN=1 if on purpose"
    )


# -- the synthetic data itself ----------------------------------------------------------------


def test_mixed_records_cover_every_outcome_the_report_draws() -> None:
    statuses = {r.status for r in mixed_records()}
    assert {
        "ok",
        "export_failed",
        "numerics_mismatch",
        "dynamic_mismatch",
        "ort_run_failed",
        "xfail",
    } <= statuses
    assert {"timeout", "crashed", "skipped", "not_attempted"} <= statuses
    assert len({r.cell.key for r in mixed_records()}) == len(mixed_records()) == 20


def test_realistic_records_are_seeded() -> None:
    assert [r.to_json() for r in realistic_records()] == [r.to_json() for r in realistic_records()]

"""The model builders against a plain script (issue 49): for five decode architectures and
each builder, the harness's cell (the real CLI: the builder's command, the graph judged,
16 tokens through the harness's loop and through onnxruntime_genai's Generator) and the
builder's command with ORT, the Generator and transformers' `generate` in a fresh process
(benchmarks/plain_builder.py, no harness code) must agree on the verdict (built or not, and
the tokens eager's or not) and on the tokens themselves.

    python -m pytest benchmarks/test_builders_differential.py
    HARNESS_BUILDER_MODELS="hf.llama.decode,hf.olmo.decode" python -m pytest benchmarks/test_builders_differential.py
"""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.conftest import Figures, harness, plain
from harness.cell import generation
from harness.store import rundir
from harness.store.records import Record
from harness.store.status import Status
from model_zoo.transformers._decode import build_lm

MODELS = (
    "hf.llama.decode",
    "hf.qwen2.decode",
    "hf.gemma.decode",
    "hf.granite.decode",
    "hf.olmo.decode",
)
BUILDERS = ("genai-builder", "mobius")


def _compare(r: Record) -> tuple[str, str, list[str]]:
    """The harness's verdict, the plain script's, and what differs between them."""
    model_type = str((r.metadata or {}).get("model_type"))
    ids = generation.prompt(build_lm(model_type, "causal-lm"))[0].tolist()
    out = plain("plain_builder.py", "--model", r.model, "--builder", r.exporter,
                "--prompt", ",".join(map(str, ids)))  # fmt: skip
    g = r.numerics.generation
    served = (r.numerics.generations or {}).get("genai")
    built = r.status is not Status.SKIPPED and r.export.seconds is not None
    mine = "not built" if not built else "tokens" if g is not None and g.ok else "other tokens"
    theirs = (
        "not built"
        if not out["built"]
        else "tokens"
        if out["ort"] == out["eager"]
        else "other tokens"
    )
    differs = [] if mine == theirs else ["verdict"]
    if built and out["built"] and g is not None:
        if (g.eager_tokens, g.ort_tokens) != (out["eager"], out["ort"]):
            differs.append("tokens")
        if (
            served is not None
            and served.error is None
            and served.ort_tokens != out["generator"][: len(served.ort_tokens or [])]
        ):
            differs.append("Generator tokens")
        if r.export.onnx_ops != dict(sorted(out["ops"].items())):
            differs.append("graphs")
    return mine, theirs, differs


def test_five_architectures_build_as_a_plain_script_does(
    benchmark, figures: Figures, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    models = os.environ.get("HARNESS_BUILDER_MODELS", ",".join(MODELS))
    out = tmp_path / "builders"
    benchmark.pedantic(
        lambda: harness(
            "run", "--suite", "transformers-decode", "--models", models, "--exporters",
            ",".join(BUILDERS), "--patches", "none", "--timeout", "600", "--out", str(out),
            "--no-report", env={"HARNESS_REPRO_BOUND": "0"},
        ),
        rounds=1,
        iterations=1,
    )  # fmt: skip
    records = sorted(rundir.read_records(out), key=lambda r: (r.model, r.exporter))
    lines = ["| model | builder | harness | plain script | differs |", "|---|---|---|---|---|"]
    agree = 0
    for r in records:
        mine, theirs, differs = _compare(r)
        agree += not differs
        lines.append(
            f"| {r.model} | {r.exporter} | {mine} | {theirs} | {'; '.join(differs) or 'same'} |"
        )
    benchmark.extra_info.update(cells=len(records), agree=agree)
    figures.add("model builders vs a plain script", [f"{agree}/{len(records)} agree", "", *lines])
    assert agree == len(records), "\n".join(lines)

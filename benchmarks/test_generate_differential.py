"""transformers' exporter for generation against a plain script (issue 40): for ten decode
architectures, the harness's `transformers` cell (through the real CLI: components and
generation token by token) and `export_for_generation` with transformers' own `generate`
through its ORT runners in a fresh process (benchmarks/plain_generate.py) must give the
same graphs (op counts summed over the components) and the same eager and ORT tokens.

    python -m pytest benchmarks/test_generate_differential.py
    HARNESS_GENERATE_MODELS="hf.llama.decode,hf.gpt2.decode" python -m pytest benchmarks/test_generate_differential.py
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

from benchmarks.conftest import Figures, harness, plain
from harness.cell import generation
from harness.store import rundir
from harness.store.records import Record
from model_zoo.transformers._decode import build_lm

MODELS = (
    "hf.llama.decode",
    "hf.gemma2.decode",
    "hf.qwen2.decode",
    "hf.mistral.decode",
    "hf.phi3.decode",
    "hf.gpt2.decode",
    "hf.granite.decode",
    "hf.olmo2.decode",
    "hf.gemma3_text.decode",
    "hf.smollm3.decode",
)


def _plain(r: Record) -> list[str]:
    """What differs between the cell and the plain script (nothing: [])."""
    model_type = str((r.metadata or {}).get("model_type"))
    ids = generation.prompt(build_lm(model_type, "causal-lm"))[0].tolist()
    prompt = ",".join(map(str, ids))
    out = plain(
        "plain_generate.py", "--model", r.model, "--opset", str(r.opset), "--prompt", prompt
    )
    summed: collections.Counter[str] = collections.Counter()
    for ops in out["ops"].values():
        summed.update(ops)
    found, differs = r.numerics.generation, []
    if r.export.onnx_ops != dict(sorted(summed.items())):
        differs.append("graphs")
    if found is None or (found.eager_tokens, found.ort_tokens) != (out["eager"], out["ort"]):
        differs.append("tokens")
    return differs


def test_ten_architectures_generate_as_a_plain_script_does(
    benchmark, figures: Figures, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    models = os.environ.get("HARNESS_GENERATE_MODELS", ",".join(MODELS))
    out = tmp_path / "generate"
    benchmark.pedantic(
        lambda: harness(
            "run", "--suite", "transformers-decode", "--models", models, "--exporters",
            "transformers", "--opsets", "18", "--patches", "none", "--out", str(out),
            "--no-report",
        ),
        rounds=1,
        iterations=1,
    )  # fmt: skip
    records = sorted(rundir.read_records(out), key=lambda r: r.model)
    lines = ["| model | status | tokens | plain script |", "|---|---|---|---|"]
    agree = 0
    for r in records:
        differs = _plain(r) if r.numerics.generation is not None else ["not generated"]
        agree += not differs
        g = r.numerics.generation
        tokens = "-" if g is None else f"{g.agree}/{g.new_tokens}"
        lines.append(f"| {r.model} | {r.status} | {tokens} | {'; '.join(differs) or 'same'} |")
    benchmark.extra_info.update(cells=len(records), agree=agree)
    figures.add(
        "transformers' exporter for generation vs a plain script",
        [f"{agree}/{len(records)} agree", "", *lines],
    )
    assert agree == len(records), "\n".join(lines)


# Models fed more than text: Whisper (audio features) and vision-language models (images).
MULTIMODAL = (
    "hf.whisper.speech-seq2seq,hf.qwen2_vl.image-text-to-text,hf.mistral3.image-text-to-text"
)
TASKS = Path(__file__).resolve().parents[1] / "model_zoo" / "transformers" / "tasks.py"


def _components_differ(r: Record) -> list[str]:
    """What differs between the cell's components and a plain export_for_generation's."""
    flags = ["--dynamic"] if r.cell.dynamic else []
    out = plain(
        "plain_components.py", "--source", str(TASKS), "--model", r.model,
        "--opset", str(r.opset), *flags,
    )  # fmt: skip
    summed: collections.Counter[str] = collections.Counter()
    for ops in out["ops"].values():
        summed.update(ops)
    mine = r.numerics.components or {}
    differs = [] if r.export.onnx_ops == dict(sorted(summed.items())) else ["graphs"]
    if list(mine) != out["components"]:
        differs.append(f"components {list(mine)} vs {out['components']}")
    for name, check in mine.items():
        got = [c.max_abs for c in check.checks]
        want = out["max_abs"].get(name, [])
        if len(got) != len(want) or any(
            abs((g or 0) - w) > 1e-6 + 1e-6 * w for g, w in zip(got, want, strict=False)
        ):
            differs.append(f"{name} numbers {got} vs {want}")
    return differs


def test_multimodal_components_as_a_plain_script(
    benchmark, figures: Figures, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Whisper and two VLMs through transformers' exporter for generation from their own
    inputs, static and dynamic: the same components, graphs and numbers as a plain script."""
    out = tmp_path / "multimodal"
    benchmark.pedantic(
        lambda: harness(
            "run", "--suite", "transformers-tasks", "--models", MULTIMODAL, "--exporters",
            "transformers", "--dynamic", "--out", str(out), "--no-report", "--repro-bound", "0",
        ),
        rounds=1,
        iterations=1,
    )  # fmt: skip
    records = sorted(rundir.read_records(out), key=lambda r: r.cell.label())
    lines = ["| cell | status | components | plain script |", "|---|---|---|---|"]
    agree = 0
    for r in records:
        differs = _components_differ(r) if r.numerics.components else ["no components"]
        agree += not differs
        names = ", ".join(r.numerics.components or {})
        lines.append(
            f"| {r.cell.label()} | {r.status} | {names} | {'; '.join(differs) or 'same'} |"
        )
    benchmark.extra_info.update(cells=len(records), agree=agree)
    figures.add(
        "transformers' exporter on Whisper and VLMs vs a plain script",
        [f"{agree}/{len(records)} agree", "", *lines],
    )
    assert agree == len(records), "\n".join(lines)

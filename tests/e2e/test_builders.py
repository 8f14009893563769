"""Every way to an ONNX model, side by side (issue 49), through the real commands: one
decode architecture (the tiny Llama) exported by dynamo and transformers' exporter and
built by onnxruntime-genai's builder and mobius in one `harness run`; each builder's graph
judged like any cell (prefill and decode-step numerics, 16 greedy tokens through the
harness's loop and through onnxruntime_genai's Generator, a right-padded batch) and checked
against a plain script (benchmarks/plain_builder.py); its report, `harness compare` and the
site set the four ways side by side with figures read from the records."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cell import generation
from harness.store import rundir
from harness.store.measures import Generation
from harness.store.records import Record
from harness.store.status import Status
from model_zoo.transformers._decode import build_lm
from tests.conftest import REPO, run_cli

WAYS = ("dynamo", "transformers", "genai-builder", "mobius")
BUILDERS = ("genai-builder", "mobius")
PLAIN = REPO / "benchmarks" / "plain_builder.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ways") / "run"
    done = run_cli(
        "run", "--suite", "transformers-decode", "--models", "hf.llama.decode",
        "--exporters", ",".join(WAYS), "--patches", "none", "--timeout", "600", "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _records(run: Path) -> dict[str, Record]:
    return {r.exporter: r for r in rundir.read_records(run)}


def test_every_way_generates_eagers_tokens(run: Path) -> None:
    found = _records(run)
    assert set(found) == set(WAYS)
    for exporter, r in found.items():
        assert r.status is Status.OK, (exporter, r.error_message)
        assert r.numerics.generation is not None and r.numerics.generation.ok
    # the one-graph ways generate a padded batch too; the builders' folders the Generator
    assert set(found["dynamo"].numerics.generations or {}) == {"batched"}
    batched = (found["dynamo"].numerics.generations or {})["batched"]
    assert (batched.padding, batched.lengths, batched.ok) == ("left", [8, 3, 5], True)
    for builder in ("genai-builder", "mobius"):
        assert set(found[builder].numerics.generations or {}) == {
            "batched",
            "genai",
            "genai-batched",
        }


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_built_llama_is_judged_like_any_graph(run: Path, builder: str) -> None:
    r = _records(run)[builder]
    assert r.status is Status.OK, r.error_message
    assert r.export.phases is not None and set(r.export.phases) == {"checkpoint", "build"}
    assert r.export.seconds == pytest.approx(sum(r.export.phases.values()), rel=1e-3)
    # the builder's own process: torch and transformers imported, the checkpoint read
    assert r.export.peak_rss_mb is not None and r.export.peak_rss_mb > 150
    # ORT's own ops, a fact of the record (the graph is not given to onnx.checker)
    assert r.ort.fused_ops is not None and r.ort.fused_ops["GroupQueryAttention"] == 2
    assert r.ort.optimizers == ["exporter"]
    # judged at the prefill and the decode step, not at the example (3 tokens after a past)
    names = [c.name for c in r.numerics.checks or []]
    assert names[0] == "logits@batch=1,past=0,sequence=4"
    assert "logits@batch=3,past=9,sequence=1" in names
    assert all(c.max_abs is not None and c.max_abs < 1e-4 for c in r.numerics.checks or [])
    assert r.shape_latency is not None and set(r.shape_latency) == {"decode_step", "prefill"}
    assert r.export.onnx_bytes is not None and r.export.onnx_bytes > 500_000  # weights


@pytest.mark.parametrize("builder", BUILDERS)
def test_a_built_llama_generates_eagers_tokens_through_the_generator_too(
    run: Path, builder: str
) -> None:
    r = _records(run)[builder]
    assert r.numerics.generation is not None
    assert (r.numerics.generation.agree, r.numerics.generation.new_tokens) == (16, 16)
    found = r.numerics.generations or {}
    single = found["genai"]
    assert single.ok and single.ort_tokens == r.numerics.generation.eager_tokens
    for name in ("batched", "genai-batched"):
        batch: Generation = found[name]
        # GroupQueryAttention reads each row's length: the rows are fed padded on the right
        assert (batch.lengths, batch.padding) == ([8, 3, 5], "right")
        assert batch.ok, (name, batch)


def test_the_genai_builder_agrees_with_a_plain_script(run: Path) -> None:
    """The builder's command, ORT and the Generator, no harness code (eager through
    transformers' own `generate`): the same tokens and the same graph."""
    r = _records(run)["genai-builder"]
    prompt = generation.prompt(build_lm("llama", "causal-lm"))[0].tolist()
    done = subprocess.run(
        [sys.executable, str(PLAIN), "--model", "hf.llama.decode", "--builder", "genai-builder",
         "--prompt", ",".join(map(str, prompt))],
        capture_output=True, text=True, timeout=600, check=True, cwd=REPO,
    )  # fmt: skip
    plain = json.loads(done.stdout.strip().splitlines()[-1])
    g = r.numerics.generation
    assert g is not None and plain["built"]
    assert plain["eager"] == g.eager_tokens == plain["ort"] == g.ort_tokens == plain["generator"]
    assert plain["ops"] == r.export.onnx_ops
    assert plain["prompt_max_abs"] < 1e-4


def test_the_report_sets_the_ways_side_by_side(run: Path) -> None:
    report = (run / "report.md").read_text()
    section = report.split("## Every way to an ONNX model, side by side", 1)[1].split("\n## ", 1)[0]
    found = _records(run)
    fastest = min(
        found[w].shape_latency["decode_step"].ort_latency_ms.p50  # type: ignore[index]
        for w in ("dynamo", "genai-builder", "mobius")
    )
    for way in WAYS:
        assert f"| {way} | 1 | 1/1 | 1/1 | 1/1 |" in section
    row = next(line for line in section.splitlines() if "| genai-builder | ok |" in line)
    decode = found["genai-builder"].shape_latency["decode_step"].ort_latency_ms.p50  # type: ignore[index]
    assert f"{decode:.3g} (×{decode / fastest:.2f})" in row
    assert f"| {found['genai-builder'].export.onnx_nodes} |" in row
    hf_row = next(line for line in section.splitlines() if "| transformers | ok |" in line)
    assert "(own shapes)" in hf_row


def test_compare_sets_the_ways_side_by_side(run: Path, tmp_path: Path) -> None:
    again = tmp_path / "again"
    shutil.copytree(run, again)
    out = tmp_path / "compare"
    done = run_cli("compare", str(run), str(again), "--no-expected", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "### Every way side by side" in done.stdout
    ways = json.loads((out / "compare.json").read_text())["ways"]
    assert [s["exporter"] for s in ways["candidate"]] == list(WAYS)
    (arch,) = ways["architectures"]
    by_way = {w["exporter"]: w for w in arch["ways"]}
    assert by_way["mobius"]["genai"] is True and by_way["dynamo"]["genai"] is None
    assert by_way["genai-builder"]["nodes"] == _records(run)["genai-builder"].export.onnx_nodes


def test_the_site_has_a_page_of_the_ways(run: Path, tmp_path: Path) -> None:
    db = tmp_path / "history.sqlite"
    assert run_cli("history", "--db", str(db), "add", str(run)).returncode == 0
    site = tmp_path / "site"
    done = run_cli("publish", str(db), "--out", str(site))
    assert done.returncode == 0, done.stderr
    (page,) = (site / "ways").glob("*.html")
    html = page.read_text()
    for way in WAYS:
        assert f"<th>{way}</th>" in html
    (suite,) = (site / "suite").glob("*.html")
    assert f"../ways/{page.name}" in suite.read_text()

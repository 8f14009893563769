"""Adapters for real model libraries (model_zoo/hf, model_zoo/torchvision), the
torch.onnx.ExportableModule entry (model_zoo/exportable) and the large model
(model_zoo/large): they load as ModelSpecs, run through the real CLI, and are skipped with
the reason where their library does not import."""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from harness import exporters
from harness.cell.shapes import Inputs, flatten_outputs
from harness.exporters import ExportRequest
from harness.plan import suites
from harness.store import rundir as store
from harness.zoo import discovery
from tests.conftest import REPO, package_index_problem, run_cli

HF = discovery.BUILTIN_ZOO / "hf"
EXPORTABLE = discovery.BUILTIN_ZOO / "exportable" / "exportable_mlp.py"
LARGE = discovery.BUILTIN_ZOO / "large" / "linear_stack_2gb.py"
HF_MODELS = {
    "hf_bert", "hf_gpt2", "hf_llama", "hf_t5", "hf_vit", "hf_whisper_encoder", "hf_wav2vec2",
}  # fmt: skip
TORCHVISION_MODELS = {
    "tv_resnet18",
    "tv_mobilenet_v3_small",
    "tv_squeezenet1_0",
    "tv_shufflenet_v2_x0_5",
}


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Models come from configs: nothing may reach the Hub (the CLI inherits this)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


# -- zoo entries load as specs ------------------------------------------------------------


def test_adapter_entries_declare_their_library() -> None:
    specs = {s.name: s for f in discovery.zoo_files(HF) for s in discovery.load_file(f)}
    assert set(specs) == HF_MODELS
    assert all(s.family == "hf" and s.requires[0] == "transformers" for s in specs.values())
    # what the zygote imports before it forks a cell: every module must import here
    assert all(s.missing_requirement() is None for s in specs.values())
    tv = discovery.load_file(discovery.BUILTIN_ZOO / "torchvision" / "classifiers.py")
    assert {s.name for s in tv} == TORCHVISION_MODELS
    assert all(s.family == "torchvision" and s.requires == ("torchvision",) for s in tv)


def test_adapter_files_import_without_their_library() -> None:
    """A zoo file imports its library only inside `build`: with transformers and
    torchvision unimportable, the files still load and say why their cells are skipped."""
    script = """
import sys
sys.modules["transformers"] = None  # `import transformers` now raises ImportError
sys.modules["torchvision"] = None
from pathlib import Path
from harness.zoo import discovery
for folder in ("hf", "torchvision"):
    for f in discovery.zoo_files(discovery.BUILTIN_ZOO / folder):
        for spec in discovery.load_file(f):
            print(spec.name, "|", spec.missing_requirement())
"""
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    reasons = dict(line.split(" | ") for line in result.stdout.splitlines())
    assert set(reasons) == HF_MODELS | TORCHVISION_MODELS
    assert all(reasons[n].startswith("transformers is not available here") for n in HF_MODELS)
    assert all(
        reasons[n].startswith("torchvision is not available here") for n in TORCHVISION_MODELS
    )


def test_hf_model_outputs_flatten_through_to_tuple() -> None:
    """Unwrapped HF models return ModelOutput; the harness flattens it with to_tuple(), in
    the order the exporters list graph outputs (None fields dropped)."""
    pytest.importorskip("transformers")
    from transformers.modeling_outputs import BaseModelOutputWithPooling

    hidden, pooled = torch.rand(2, 3, 4), torch.rand(2, 4)
    out = BaseModelOutputWithPooling(
        last_hidden_state=hidden, pooler_output=pooled, attentions=None
    )
    flat = flatten_outputs(out)
    assert len(flat) == 2 and flat[0] is hidden and flat[1] is pooled


def test_exportable_module_entry_loads_as_a_model_spec() -> None:
    (spec,) = discovery.load_file(EXPORTABLE)
    model = spec.build()
    assert isinstance(model, torch.onnx.ExportableModule)
    assert (spec.name, spec.family) == ("exportable_mlp", "exportable")
    assert spec.tags == ("exportable", "exportable-module")
    assert spec.description and "\n" not in spec.description
    (x,) = spec.example_inputs()
    args, kwargs = model.example_arguments()
    assert torch.equal(x, args[0]) and x.shape == (4, 32) and kwargs is None
    assert spec.example_kwargs is None
    assert spec.dynamic_shapes == ({0: "batch"},) == model.dynamic_shapes()
    assert spec.build() is model  # one instance, built (and seeded) at import
    assert model(x).shape == (4, 10)


def test_torchscript_cell_exports_an_exportable_module_as_a_direct_call_does(
    tmp_path: Path,
) -> None:
    """torch.onnx.export(..., dynamo=False) hands an ExportableModule to the dynamo
    exporter (torch 2.13); the `torchscript` cell makes the same call, so it gets the same
    graph a user gets, whichever exporter torch picks."""
    import onnx

    (spec,) = discovery.load_file(EXPORTABLE)
    model = spec.build().eval()
    request = ExportRequest(
        model=model,
        inputs=Inputs(spec.example_inputs(), {}, ("features",)),
        opset=18,
        path=tmp_path / "cell.onnx",
        output_names=("output_0",),
    )
    exporters.get("torchscript").export(request)
    direct = tmp_path / "direct.onnx"
    torch.onnx.export(
        model,
        tuple(spec.example_inputs()),
        str(direct),
        input_names=["features"],
        output_names=["output_0"],
        opset_version=18,
        dynamo=False,
    )

    def op_types(path: Path) -> list[str]:
        return [n.op_type for n in onnx.load(str(path)).graph.node]

    assert op_types(request.path) == op_types(direct)
    assert len(op_types(direct)) > 0


def test_large_model_is_over_two_gib_and_only_in_the_large_suite() -> None:
    (spec,) = discovery.load_file(LARGE)
    module = importlib.import_module("model_zoo.large.linear_stack_2gb")
    assert module.WEIGHT_BYTES > 2**31  # protobuf's cap: the exporters must write external data
    with torch.device("meta"):
        model = module.LinearStack()  # no memory: shapes only
    assert sum(p.numel() * p.element_size() for p in model.parameters()) == module.WEIGHT_BYTES
    assert spec.family == "large"
    everything = discovery.discover(entry_points=False)
    selecting = [
        name
        for name in suites.available_suites()
        if spec.name in {m.name for m in everything.select(suites.load_suite(name).models)}
    ]
    assert selecting == ["large"]


# -- the real CLI -------------------------------------------------------------------------


@pytest.mark.e2e
def test_transformers_models_export_and_match_in_ort(tmp_path: Path, offline: None) -> None:
    pytest.importorskip("transformers")
    out = tmp_path / "hf"
    result = run_cli(
        "run", "--suite", "hf", "--models", "hf_bert,hf_llama", "--exporters", "dynamo",
        "--opsets", "18", "--static-only", "--out", str(out), "--timeout", "300", "--no-report",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = {r.model: r for r in store.read_records(out)}
    assert set(records) == {"hf_bert", "hf_llama"}
    for record in records.values():
        assert record.status == "ok", (record.model, record.error_message)
        assert record.export.opset_actual == 18
        assert record.numerics.checks and all(c.ok for c in record.numerics.checks)
        assert record.ort.latency is not None and record.speedup is not None
    # BERT's two outputs (hidden states, pooled) and LLaMA's logits, in graph order.
    assert [c.name for c in records["hf_bert"].numerics.checks] == ["output_0", "output_1"]
    assert [c.name for c in records["hf_llama"].numerics.checks] == ["output_0"]


@pytest.mark.e2e
@pytest.mark.skipif(
    importlib.util.find_spec("torchvision") is not None, reason="torchvision is installed here"
)
def test_torchvision_cells_are_skipped_with_the_reason(tmp_path: Path) -> None:
    out = tmp_path / "tv"
    result = run_cli(
        "run", "--suite", "torchvision", "--opsets", "18", "--out", str(out),
        "--timeout", "120", "--no-report",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = store.read_records(out)
    # 4 models x 2 exporters x opset 18 x static + dynamic, each with exactly one record
    assert len(records) == len({r.cell.key for r in records}) == 16
    assert {r.model for r in records} == TORCHVISION_MODELS
    for r in records:
        assert r.status == "skipped", (r.model, r.status, r.error_message)
        assert "torchvision is not available here" in (r.reason or ""), r.reason
        assert r.export.seconds is None and r.numerics.checks is None


# -- the torchvision adapter with torchvision's real model code ----------------------------

TORCHVISION_VERSION = "0.28.0"  # the release built for torch 2.13.0 (it pins torch==2.13.0)
TORCHVISION_SITE = REPO / ".cache" / f"torchvision-{TORCHVISION_VERSION}"
TORCHVISION_STUB = REPO / "tests" / "torchvision_stub"


@pytest.fixture(scope="session")
def torchvision_site() -> Path:
    """torchvision's wheel unpacked outside the environment (pip --target, no dependencies:
    its torch pin is the installed torch), so only the test that puts it on PYTHONPATH
    sees it; fetched once into .cache/."""
    if not (TORCHVISION_SITE / "torchvision").is_dir():
        if problem := package_index_problem(f"torchvision=={TORCHVISION_VERSION}"):
            pytest.skip(f"torchvision's wheel is not in .cache/ and {problem}")
        partial = TORCHVISION_SITE.with_name(TORCHVISION_SITE.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
             "--target", str(partial), f"torchvision=={TORCHVISION_VERSION}"],
            check=True,
            timeout=600,
        )  # fmt: skip
        partial.rename(TORCHVISION_SITE)
    return TORCHVISION_SITE


@pytest.mark.e2e
def test_torchvision_adapter_end_to_end(torchvision_site: Path, tmp_path: Path) -> None:
    """The adapter where torchvision imports: its C++ operators are the one stand-in (see
    tests/torchvision_stub), the classifiers' code and everything after them is real."""
    out = tmp_path / "tv"
    path = os.pathsep.join(
        [str(torchvision_site), str(TORCHVISION_STUB), os.environ.get("PYTHONPATH", "")]
    )
    result = run_cli(
        "run", "--suite", "torchvision", "--models", "tv_resnet18",
        "--opsets", "18", "--out", str(out), "--no-report",
        env={"PYTHONPATH": path}, fresh=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    records = store.read_records(out)
    # 1 model x 2 exporters x opset 18 x static + dynamic (the suite's dynamic batch)
    assert sorted(r.cell.label() for r in records) == sorted(
        f"tv_resnet18 {e}@18 cpu{' dynamic' if d else ''}"
        for e in ("dynamo", "torchscript")
        for d in (False, True)
    )
    for r in records:
        assert r.status == "ok", (r.cell.label(), r.status, r.error_message)
        assert r.numerics.checks and all(c.ok for c in r.numerics.checks)
        assert r.export.onnx_ops and "Conv" in r.export.onnx_ops
        assert r.ort.latency is not None and r.export.opset_actual == 18

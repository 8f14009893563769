"""The decode zoo (model_zoo/transformers/decoders.py, the `transformers-decode` suite): one
generation step with a KV cache per causal-/seq2seq-LM head. The inventory and the entries
made from it (pure), the cache's names and dimensions, a sample built and run as a cell
does, real cells (export, ORT, two more shapes, latency at a decode step and a prefill),
and a few entries end to end through the real CLI, the sliding-window patch among them. The
whole suite is run by benchmarks/test_transformers_decode.py."""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import onnx
import pytest
import torch

from harness.plan.suites import load_suite
from harness.runtime.worker import run_cell
from harness.store import rundir as store
from harness.store.axes import PATCH
from harness.store.environment import installed_version
from harness.store.records import Cell, CellTask, Record
from harness.store.status import Status
from harness.zoo import discovery, expected_file
from model_zoo.transformers import _decode_inventory, _inventory
from model_zoo.transformers._decode_probe import input_dims
from tests.conftest import load_zoo_file_fresh, run_cli

ZOO_FILE = discovery.BUILTIN_ZOO / "transformers" / "decoders.py"
INVENTORY = _inventory.read_inventory(_decode_inventory.DECODE_INVENTORY)
ENTRIES = INVENTORY["models"]
BUILT = sorted(n for n, e in ENTRIES.items() if "reason" not in e)
FAMILY = _decode_inventory.DECODE_FAMILY


def _spec(name: str):  # type: ignore[no-untyped-def]
    (spec,) = [s for s in discovery.load_file(ZOO_FILE) if s.name == name]
    return spec


# -- the inventory and the entries (pure) ------------------------------------------------------


def test_names_say_the_type_and_the_head() -> None:
    assert _decode_inventory.decode_name("llama", "causal-lm") == "hf.llama.decode"
    assert _decode_inventory.decode_name("t5", "seq2seq-lm") == "hf.t5.decode-seq2seq"


def test_a_step_without_position_ids_keeps_its_place_in_the_dynamic_spec() -> None:
    entry = {
        "head": "causal-lm",
        "step": "decoder",
        "inputs": ["input_ids", "attention_mask", "past_key_values.0.conv_states.0"],
        "dims": {
            "input_ids": {"0": "batch", "1": "sequence"},
            "attention_mask": {"0": "batch", "1": "sequence"},
            "past_key_values.0.conv_states.0": {"0": "batch"},
        },
    }
    assert _decode_inventory.dynamic_shapes(entry) == (
        {0: "batch", 1: "sequence"},
        {0: "batch", 1: "sequence"},
        None,  # forward(input_ids, attention_mask, position_ids, past_key_values)
        [{0: "batch"}],
    )


def test_the_probe_names_each_axis_by_how_it_moved() -> None:
    example = (
        torch.zeros(2, 3),
        torch.zeros(2, 8),
        torch.zeros(2, 4, 5, 16),
        torch.zeros(2, 4, 8, 16),
    )
    other = (
        torch.zeros(3, 4),
        torch.zeros(3, 11),
        torch.zeros(3, 4, 7, 16),
        torch.zeros(3, 4, 12, 16),
    )
    names = ["input_ids", "attention_mask", "past.0.decoder.key", "past.0.encoder.key"]
    assert input_dims(names, example, other) == {
        "input_ids": {"0": "batch", "1": "sequence"},
        "attention_mask": {"0": "batch", "1": "total"},
        "past.0.decoder.key": {"0": "batch", "2": "past"},
        "past.0.encoder.key": {"0": "batch", "2": "encoder"},
    }
    with pytest.raises(ValueError, match="no dimension explains"):
        input_dims(["x"], (torch.zeros(2, 9),), (torch.zeros(2, 10),))


def test_the_zoo_file_builds_nothing_and_imports_no_library() -> None:
    # (how long the load takes is a figure of benchmarks/, not a timed test here)
    count, _, transformers_loaded, torch_loaded = load_zoo_file_fresh(ZOO_FILE)
    assert count == len(ENTRIES) and not transformers_loaded and not torch_loaded


def test_every_head_is_an_entry_and_the_unbuildable_say_why() -> None:
    specs = {s.name: s for s in discovery.load_file(ZOO_FILE)}
    assert len(specs) == len(ENTRIES) == INVENTORY["registry"]
    assert len(BUILT) >= 150, f"only {len(BUILT)} heads build with a cache"
    for name, entry in ENTRIES.items():
        spec = specs[name]
        assert spec.family == FAMILY and spec.dynamic_shapes is not None
        if "reason" in entry:
            assert spec.skip_reason and entry["reason"] in spec.skip_reason
            continue
        assert spec.input_names == tuple(entry["inputs"])
        assert spec.output_names[0] == "logits"
        cache = [n for n in entry["inputs"] if n.startswith("past_key_values.")]
        assert len(spec.dynamic_shapes[-1]) == len(cache) > 0
        assert [
            n.replace("present.", "past_key_values.", 1) for n in spec.output_names[1:]
        ] == cache


@pytest.mark.skipif(
    installed_version("transformers") != INVENTORY["transformers"],
    reason=f"the decode inventory is for transformers {INVENTORY['transformers']}; refresh it",
)
def test_the_inventory_covers_the_installed_heads() -> None:
    from model_zoo.transformers._refresh import _decode_named, decode_registry

    assert sorted(ENTRIES) == sorted(_decode_named({item: {} for item in decode_registry()}))


def test_the_suite_runs_every_entry_dynamic_only() -> None:
    suite = load_suite("transformers-decode")
    assert suite.dynamic == "only" and suite.models == (f"family:{FAMILY}",)
    assert suite.values(PATCH) == ("none", "sliding-window")
    assert suite.exporters == ("dynamo", "torchscript", "transformers")
    assert suite.opsets_for("dynamo") == suite.opsets_for("transformers") == (18,)


def test_the_expected_failures_are_in_the_expected_status_grammar() -> None:
    rows = expected_file.read(_decode_inventory.DECODE_EXPECTED).rows
    for row in rows:
        assert row.model in BUILT, f"{row.source}: {row.model} is not a built decode entry"
        assert row.status is not None and row.stage is not None and row.reason, row.source


# -- a sample, built and run as a cell does -----------------------------------------------------

# GQA + RoPE, absolute positions, a BERT-like head in decoder mode, sliding-window layers,
# recurrent states (no empty cache), an encoder-decoder, an audio LM decoding on its own.
SAMPLE = [
    "hf.llama.decode",
    "hf.gpt2.decode",
    "hf.bert.decode",
    "hf.gemma2.decode",
    "hf.mamba.decode",
    "hf.t5.decode-seq2seq",
    "hf.voxtral.decode-seq2seq",
]


def test_an_inventory_a_newer_transformers_left_behind_says_so_and_how_to_refresh() -> None:
    """transformers 5.25 flattened a linear-attention cache into two more tensors than 5.24
    did: an entry probed with another release names the wrong inputs. Its example inputs
    say which release probed it and the command that probes it again, where a count
    mismatch alone (`harness.cell.shapes`) would leave the user guessing."""
    pytest.importorskip("transformers")
    stale = copy.deepcopy(INVENTORY)
    stale["transformers"] = "5.24.0"
    entry = stale["models"]["hf.mamba.decode"]
    entry["inputs"] = [n for n in entry["inputs"] if "cumulative" not in n]  # as 5.24 named
    entry["dims"] = {n: d for n, d in entry["dims"].items() if n in entry["inputs"]}
    (spec,) = [s for s in _decode_inventory.decode_specs(stale) if s.name == "hf.mamba.decode"]
    fresh = _spec("hf.mamba.decode")
    torch.manual_seed(0)
    assert len(fresh.example_inputs()) == 4  # ids, mask, no position ids, the cache
    with pytest.raises(ValueError, match="probed with transformers") as raised:
        spec.example_inputs()
    message = str(raised.value)
    assert "probed with transformers 5.24.0, names 6" in message
    assert f"transformers {installed_version('transformers')} gives this step 8" in message
    assert "`harness zoo refresh transformers-decode`" in message


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_builds_and_steps_at_every_shape_it_is_checked_at(name: str) -> None:
    pytest.importorskip("transformers")
    if name not in BUILT:
        pytest.fail(f"{name} no longer builds: {ENTRIES[name]}")
    spec = _spec(name)
    torch.manual_seed(0)
    step = spec.build().eval()
    torch.manual_seed(0)
    example = spec.example_inputs()
    shapes = [*spec.dynamic_sizes, *spec.latency_shapes.values()]
    for args in [example, *(spec.inputs_at(step, sizes) for sizes in shapes)]:
        tensors = [t for t in torch.utils._pytree.tree_leaves(args) if isinstance(t, torch.Tensor)]
        assert len(tensors) == len(spec.input_names)
        with torch.no_grad(), warnings.catch_warnings():
            # the cache passed under the name the model's forward takes now
            warnings.filterwarnings("error", ".*past_key_values.* deprecated", FutureWarning)
            outputs = step(*args)
        assert len(outputs) == len(spec.output_names)
        assert torch.isfinite(outputs[0]).all()
    decode, prefill = spec.latency_shapes["decode_step"], spec.latency_shapes["prefill"]
    assert (decode["sequence"], decode["past"]) == (1, 32)
    assert prefill["sequence"] == 32 and prefill["past"] == (1 if name == "hf.mamba.decode" else 0)


# -- real cells: export, ORT, the other shapes, latency ---------------------------------------


def _cell(tmp_path: Path, name: str, exporter: str, patch: str = "none") -> Record:
    cell = Cell(name, exporter, 18, "cpu", True, family=FAMILY, patch=patch)
    task = CellTask(
        cell,
        str(ZOO_FILE),
        "test",
        str(tmp_path),
        keep_onnx=True,
        protocol=load_suite("transformers-decode").protocol,
    )
    return run_cell(task)


@pytest.mark.slow
def test_a_decoder_step_exports_runs_at_three_shapes_and_is_timed_at_two(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    record = _cell(tmp_path, "hf.llama.decode", "dynamo")
    assert record.status is Status.OK, (record.error_signature, record.error_message)
    graph = onnx.load(str(tmp_path / record.artifacts["onnx"]), load_external_data=False).graph
    assert [i.name for i in graph.input] == list(_spec("hf.llama.decode").input_names)
    assert [o.name for o in graph.output][:3] == ["logits", "present.0.key", "present.0.value"]
    # Every declared-dynamic dimension stayed symbolic in the graph.
    past = graph.input[3].type.tensor_type.shape.dim
    assert (past[0].dim_param, past[2].dim_param, past[1].dim_value) == ("batch", "past", 4)
    checked = {c.name.partition("@")[2] for c in record.numerics.checks or ()}
    assert checked == {"", "batch=1,past=0,sequence=4", "batch=3,past=9,sequence=1"}
    assert record.numerics.checks and all(c.ok for c in record.numerics.checks)
    assert record.shape_latency is not None
    assert list(record.shape_latency) == ["decode_step", "prefill"]
    assert record.shape_latency["decode_step"].sizes == {"batch": 1, "past": 32, "sequence": 1}
    assert record.ort.latency == record.shape_latency["decode_step"].ort_latency_ms
    assert record.speedup == record.shape_latency["decode_step"].speedup


def test_torchscript_cannot_take_the_cache_and_says_so(tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    record = _cell(tmp_path, "hf.llama.decode", "torchscript")
    assert (record.status, str(record.stage)) == (Status.EXPORT_FAILED, "capture")
    assert record.error_signature == (
        "RuntimeError: TorchScript cannot take DynamicCache as an input"
        " (tensors, tuples, lists, dicts only)"
    )


# -- end to end: the real CLI, a real local Ray -------------------------------------------------


@pytest.mark.e2e
def test_a_few_decode_entries_end_to_end(tmp_path: Path) -> None:
    """A sliding layer's token count is a Python int torch.export bakes in: the past length
    is specialised. The `sliding-window` patch, asked for, makes the same model export and
    match eager at every shape; the plain cell says which axis was fixed. A cache without
    such a layer skips the patch, an unbuildable entry is skipped under both."""
    pytest.importorskip("transformers")
    unbuildable = next(n for n, e in ENTRIES.items() if "reason" in e)
    models = ["hf.gpt2.decode", "hf.gemma2.decode", unbuildable]
    out = tmp_path / "decode"
    result = run_cli(
        "run", "--suite", "transformers-decode", "--models", ",".join(models),
        "--exporters", "dynamo", "--patches", "none,sliding-window", "--out", str(out),
        "--timeout", "300",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "6 cells = 3 models x 1 exporters (dynamo)" in result.stdout + result.stderr
    records = {(r.model, r.patch): r for r in store.read_records(out)}
    assert len(records) == 6
    assert records[("hf.gpt2.decode", "none")].status is Status.OK
    # GPT-2's cache has no sliding-window layer: the patch would change nothing.
    pointless = records[("hf.gpt2.decode", "sliding-window")]
    assert pointless.status is Status.SKIPPED and "no sliding-window layer" in (
        pointless.reason or ""
    )
    for patch in ("none", "sliding-window"):
        assert records[(unbuildable, patch)].status is Status.SKIPPED
    plain = records[("hf.gemma2.decode", "none")]  # xfail: the decode zoo expects it
    assert plain.status in (Status.EXPORT_FAILED, Status.XFAIL), plain.error_signature
    assert plain.stage is not None and plain.stage.failure_status is Status.EXPORT_FAILED
    assert plain.error_signature == (
        "ValueError: tracing specialised a dynamic dimension: inputs['past_key_values'][*].shape[2]"
    )
    patched = records[("hf.gemma2.decode", "sliding-window")]
    assert patched.status is Status.OK, (patched.error_signature, patched.error_message)
    outputs = len(_spec("hf.gemma2.decode").output_names)
    assert patched.patch == "sliding-window" and len(patched.numerics.checks or ()) == 3 * outputs
    report = (out / "report.md").read_text()
    assert "| hf.gemma2.decode | only patched: sliding-window |" in report
    assert "| hf.gpt2.decode | plain |" in report
    assert (
        "## Decode step and prefill" in report
        and (out / "plots" / "generation_latency.png").is_file()
    )

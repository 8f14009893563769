from __future__ import annotations

from pathlib import Path

import pytest

from harness.errors import UsageError
from harness.plan.suites import load_suite, parse_suite
from harness.store.axes import BATCH, DTYPE, ORT_OPT, PATCH
from harness.store.options import Shapes
from harness.store.records import Dtype, OrtOpt


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return str(path)


def test_suite_with_per_exporter_opsets(tmp_path: Path) -> None:
    suite = load_suite(
        _write(
            tmp_path,
            """
models = ["mlp*", "tag:vision"]
exporters = ["dynamo", "torchscript"]
dynamic = true
[opsets]
dynamo = [18, 20]
torchscript = [17, 16, 18]
[protocol]
min_iters = 5
""",
        )
    )
    assert suite.models == ("mlp*", "tag:vision")
    assert suite.opsets_for("dynamo") == (18, 20)
    assert suite.opsets_for("torchscript") == (16, 17, 18)
    assert suite.dynamic is Shapes.BOTH
    assert suite.protocol.min_iters == 5


def test_malformed_toml_names_file_and_line(tmp_path: Path) -> None:
    path = _write(tmp_path, 'models = ["a"]\nexporters = [dynamo]\n')
    with pytest.raises(UsageError, match=r"s\.toml is not valid TOML: .*line 2"):
        load_suite(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('exporters = ["dynamo"]', "missing required key 'models'"),
        ('models = ["a"]\nexporters = ["onnx2"]', "unknown exporter 'onnx2'"),
        ('models = ["a"]\nopsets = [9000]', "opset 9000 is outside what dynamo can take"),
        (
            'models = ["a"]\nexporters = ["torchscript"]\nopsets = [21]',
            "outside what torchscript can take",
        ),
        ('models = ["a"]\nmodles = 1', "unknown key 'modles'"),
        ('models = ["a"]\n[protocol]\nmin_itres = 3', "unknown \\[protocol\\] key 'min_itres'"),
        ('models = ["a"]\ndevices = ["tpu"]', "unknown device 'tpu'"),
        ('models = ["a"]\n[opsets]\n"*" = 5', "must be a non-empty list of integers"),
        ('models = ["a"]\n[opsets]\n"*" = [18.5]', "opset 18.5 is not an integer"),
        # a protocol that contradicts itself, or never ends (a warm-up of inf: the cell hung
        # until its timeout; max_iters 0: a p50 of one call, published)
        ('models = ["a"]\n[protocol]\nmax_iters = 0', "max_iters must be at least 1"),
        ('models = ["a"]\n[protocol]\nmin_iters = 50\nmax_iters = 3', "min_iters 50 is above"),
        ('models = ["a"]\n[protocol]\nmin_iters = 2.5', "min_iters must be a whole number"),
        ('models = ["a"]\n[protocol]\nwarmup_max_s = inf', "warmup_max_s must be a finite"),
        ('models = ["a"]\n[protocol]\nbudget_s = nan', "budget_s must be a finite"),
        ('models = ["a"]\n[protocol]\ntarget_interval = 2', "target_interval is a fraction"),
        ('models = ["a"]\n[protocol]\nort_from_pairs = true', "ort_from_pairs needs pair_exp"),
        (
            'models = ["a"]\n[protocol]\nmin_time_s = 9.0\nmax_time_s = 1.0',
            "min_time_s 9.0 is above max_time_s 1.0",
        ),
        # a batch size is a whole number of at least 0 (-1 crashed its cells and left a
        # run directory nothing could read back; "x" was a traceback)
        ('models = ["a"]\nbatches = ["-1"]', "batch size '-1': a batch size is a whole number"),
        ('models = ["a"]\nbatches = ["x"]', "batch size 'x': a batch size is a whole number"),
        ('models = ["a"]\nbatches = [1.5]', "'batches' must be a non-empty list of strings"),
    ],
)
def test_suite_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_suite(_write(tmp_path, text))


def test_a_suite_writes_its_batch_sizes_as_numbers_or_text(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, 'models = ["a"]\nbatches = [0, "4"]\n'))
    assert suite.values(BATCH) == (0, 4)


def test_unknown_suite_lists_known_ones() -> None:
    with pytest.raises(UsageError, match="unknown suite 'nope'"):
        load_suite("nope")


def test_parse_suite_defaults() -> None:
    suite = parse_suite({"models": ["x"]}, name="x", source="inline")
    assert suite.exporters == ("dynamo", "torchscript")
    assert suite.opsets_for("dynamo") == (17, 18, 20)


def test_a_suite_may_run_dynamic_cells_only_and_name_its_patches(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, 'models = ["a"]\ndynamic = "only"\npatches = ["none"]\n'))
    assert suite.dynamic == "only" and suite.values(PATCH) == ("none",)
    assert parse_suite({"models": ["x"]}, name="x", source="inline").values(PATCH) == ("none",)


def test_a_suite_names_its_dtypes_float32_by_default(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, 'models = ["a"]\ndtypes = ["float16", "bfloat16"]\n'))
    assert suite.values(DTYPE) == (Dtype.FLOAT16, Dtype.BFLOAT16)
    assert parse_suite({"models": ["x"]}, name="x", source="inline").values(DTYPE) == (
        Dtype.FLOAT32,
    )


def test_a_suite_names_its_ort_optimisations_default_by_default(tmp_path: Path) -> None:
    suite = load_suite(_write(tmp_path, 'models = ["a"]\nort_opts = ["none", "fusions"]\n'))
    assert suite.values(ORT_OPT) == (OrtOpt.NONE, OrtOpt.FUSIONS)
    inline = parse_suite({"models": ["x"]}, name="x", source="inline")
    assert inline.values(ORT_OPT) == (OrtOpt.DEFAULT,)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('models = ["a"]\ndynamic = "sometimes"', "'dynamic' must be true, false or \"only\""),
        ('models = ["a"]\npatches = ["monkey"]', "unknown patch 'monkey' \\(known: none"),
        ('models = ["a"]\npatches = []', "'patches' must be a non-empty list of strings"),
        ('models = ["a"]\ndtypes = ["fp8"]', "unknown dtype 'fp8' \\(known: float32, float16"),
    ],
)
def test_suite_shape_and_patch_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        load_suite(_write(tmp_path, text))


def test_an_exporter_the_suite_does_not_name_takes_its_opsets(tmp_path: Path) -> None:
    """`--suite transformers-tasks --exporters transformers` runs opset 18, the suite's, not
    the harness's defaults (17, 18, 20); a per-exporter table's `*` the same."""
    from harness.plan.build import make_plan
    from harness.store.options import RunOptions

    suite = parse_suite({"models": ["a"], "opsets": [18]}, name="s", source="s.toml")
    assert suite.opsets_for("transformers") == (18,)
    plan = make_plan(
        RunOptions(suite="transformers-tasks", models=("hf.bert.sequence-classification",),
                   exporters=("dynamo", "transformers")),
        run_id="t",
    )  # fmt: skip
    assert sorted({(c.exporter, c.opset) for c in plan.matrix.cells}) == [
        ("dynamo", 18), ("transformers", 18),
    ]  # fmt: skip
    table = parse_suite({"models": ["a"], "opsets": {"*": [17]}}, name="s", source="s.toml")
    assert table.opsets_for("transformers") == (17,)


def test_protocol_flag_settings_replace_only_the_keys_they_name(tmp_path: Path) -> None:
    suite = load_suite(
        _write(tmp_path, 'models = ["a"]\n[protocol]\nmin_iters = 5\nmax_time_s = 2.0')
    )
    given = suite.protocol.overridden(
        "max_time_s = 0.5, latency_threads=[1, 2],pair_exporters=true"
    )
    assert (given.min_iters, given.max_time_s) == (5, 0.5)  # the suite's, then the flag's
    assert given.latency_threads == (1, 2) and given.pair_exporters
    assert suite.protocol.overridden(None) is suite.protocol


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("min_iters", r"--protocol 'min_iters': 'min_iters' has no value; give KEY=VALUE pairs"),
        ("min_iters=3 max_iters=4", "min_iters's value '3 max_iters=4' is not a number"),
        # the pair that does not read is named, after pairs that do (a list's commas too)
        (
            "latency_threads=[1, 2],share_eager=maybe,min_iters=x",
            r"share_eager's value 'maybe' is not a number, true, false or a list; give KEY=VALUE",
        ),
        ("min_time_s=0.1,max_time_s", r"'max_time_s' has no value"),
        ("min_time_s=0.1,,", r"--protocol 'min_time_s=0\.1,,': give KEY=VALUE pairs"),
        ("min_itres=3", r"--protocol: unknown \[protocol\] key 'min_itres'"),
        ("min_iters=2.5", "min_iters must be a whole number"),
        ("min_time_s=9", r"min_time_s 9 is above max_time_s 2\.0"),  # against the suite's
    ],
)
def test_protocol_flag_errors(tmp_path: Path, given: str, message: str) -> None:
    suite = load_suite(_write(tmp_path, 'models = ["a"]\n[protocol]\nmax_time_s = 2.0'))
    with pytest.raises(UsageError, match=message):
        suite.protocol.overridden(given)

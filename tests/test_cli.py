"""The command line's contract for bad input: exit 2, one line naming the problem, no
traceback, nothing written. And `--help` everywhere, `harness list`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from harness.cli import build_parser, main
from harness.commands import VERBS
from harness.commands.run import options_from_args
from harness.plan.build import make_plan
from tests.conftest import FIXTURES, one_line_error, run_cli_read_only


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run", "--suite", "nope"], "unknown suite 'nope'"),
        (
            ["run", "--suite", "smoke", "--models", "no_such_model"],
            "no model in the zoo matches 'no_such_model'",
        ),
        (["run", "--suite", "smoke", "--exporters", "onnx9"], "unknown exporter 'onnx9'"),
        (["run", "--suite", "smoke", "--opsets", "99"], "opset 99 is outside what dynamo can take"),
        (
            ["run", "--suite", "smoke", "--exporters", "torchscript", "--opsets", "21"],
            "outside what torchscript can take",
        ),
        (["run", "--suite", "smoke", "--opsets", "x"], "--opsets takes integers"),
        (["run", "--zoo", "/no/such/path"], "--zoo path /no/such/path does not exist"),
        (["run", "--zoo", str(FIXTURES / "nospec")], "defines neither SPEC nor SPECS"),
        (["run"], "nothing to run"),
        (["run", "--suite", "smoke", "--threads", "0"], "--threads must be at least 1"),
        (["run", "--suite", "smoke", "--variant", "oops"], "must look like NAME=PIP_SPEC"),
        # a list of nothing used to run the whole suite
        (["run", "--suite", "smoke", "--models", ","], "--models: takes a comma-separated list"),
        (["run", "--suite", "smoke", "--exporters", " , "], "--exporters: takes a comma-sep"),
        # the variant's cells used to crash one by one in Ray's runtime_env
        (["run", "--suite", "smoke", "--variant", "a=b=c"], "'b=c' is not something pip installs"),
        # NaN compares false with everything: the timeout never fired
        (["run", "--suite", "smoke", "--timeout", "nan"], "--timeout must be a positive number"),
        (["run", "--suite", "smoke", "--timeout", "inf"], "--timeout must be a positive number"),
        (["run", "--suite", "smoke", "--max-memory-gb", "nan"], "--max-memory-gb must be a pos"),
        # graphs were silently not kept
        (
            ["run", "--suite", "smoke", "--keep-graphs", str(FIXTURES / "budget.py")],
            "budget.py: exists and is not a directory",
        ),
        (["run", "--suite", "smoke", "--bogus"], "unrecognized arguments: --bogus"),
        (["run", "--suite", "smoke", "--patches", "monkey"], "unknown patch 'monkey'"),
        (
            ["run", "--suite", "smoke", "--dtypes", "float32,half"],
            "--dtypes: unknown dtype 'half' (known: float32, float16, bfloat16)",
        ),
        (
            ["run", "--suite", "smoke", "--ort-opt", "max"],
            "--ort-opt: unknown ORT optimisation 'max' (known: default, none, all, fusions)",
        ),
        (
            ["run", "--suite", "smoke", "--batches", "0,x"],
            "--batches: batch size 'x': a batch size is a whole number, 0 for the entry's own",
        ),
        (
            ["run", "--suite", "smoke", "--batches", "-1"],
            "--batches: batch size '-1': a batch size is a whole number",
        ),
        (
            ["run", "--suite", "smoke", "--dynamic", "--dynamic-only"],
            "not allowed with argument --dynamic",
        ),
        # --local runs without Ray: no cluster to join, no runtime environments
        (
            ["run", "--suite", "smoke", "--local", "--address", "auto"],
            "--local runs without Ray: it cannot join --address",
        ),
        (
            ["run", "--suite", "smoke", "--local", "--variant", "old=onnx==1.17"],
            "--variant needs Ray's runtime environments: drop --local",
        ),
        (
            ["compare", "a", "b", "--local", "--address", "auto"],
            "--local re-measures without Ray: it cannot join --address",
        ),
        (["list", "--suite", "nope"], "unknown suite 'nope'"),
        # a NaN floor or threshold never judges anything
        (["report", "r", "--threshold", "nan"], "--threshold: takes a finite number above 0"),
        (["compare", "a", "b", "--alpha", "nan"], "--alpha: takes a finite number above 0 and"),
        (["compare", "a", "b", "--alpha", "2"], "--alpha: takes a finite number above 0 and at"),
        (["compare", "a", "b", "--latency-floor", "-1"], "--latency-floor: takes a finite num"),
        (["compare", "a", "b", "--noise-k", "inf"], "--noise-k: takes a finite number above"),
        (["run", "--suite", "smoke", "--repro-bound", "-1"], "give 0 (none) or a positive"),
        (["run", "--suite", "smoke", "--protocol", "min_iters"], "give KEY=VALUE pairs"),
        (["run", "--suite", "smoke", "--protocol", "max_time_s=-1"], "must be a finite non-neg"),
        # smoke's max_time_s is 1.0: the flag's keys are checked with the suite's
        (["run", "--suite", "smoke", "--protocol", "min_time_s=2"], "min_time_s 2 is above max"),
        (["repro", "/no/such/run"], "RUN_DIR /no/such/run: no such run directory"),
        (["repro", "/tmp", "--bound", "0"], "--bound: 0: give 0 < SECONDS <= 3600"),
        # a list of nothing is refused, never read as every model
        (["repro", "/tmp", "--models", ","], "--models: takes a comma-separated list"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: list[str], message: str
) -> None:
    out = tmp_path / "run"
    line = one_line_error(capsys, *argv, *(["--out", str(out)] if argv[0] == "run" else []))
    assert message in line
    assert not out.exists()


def test_a_bad_protocol_variable_is_named_before_the_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_PROTOCOL", "min_iters=5,warmup=1")
    line = one_line_error(capsys, "run", "--suite", "smoke", "--out", str(tmp_path / "r"))
    assert line.startswith("error: $HARNESS_PROTOCOL: unknown [protocol] key 'warmup'")
    assert not (tmp_path / "r").exists()


def test_the_protocol_variable_is_judged_with_the_suite_it_runs_with(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its keys are checked alone before the plan; whether they agree with the rest is
    checked with the run's suite (a minimum time of 9 s fits a suite's 10-s cap, not the
    default 5 s), and the plan's protocol is the suite's with the variable's keys."""
    suite = tmp_path / "long.toml"
    suite.write_text('models = ["tiny_mlp"]\n[protocol]\nmax_time_s = 10.0\n')
    monkeypatch.setenv("HARNESS_PROTOCOL", "min_time_s=9")
    argv = [
        "run",
        "--suite",
        str(suite),
        "--zoo",
        str(FIXTURES / "tiny"),
        "--out",
        str(tmp_path / "r"),
    ]
    plan = make_plan(options_from_args(build_parser().parse_args(argv)))
    assert (plan.protocol.min_time_s, plan.protocol.max_time_s) == (9, 10.0)
    assert plan.options.protocol == "min_time_s=9" and not (tmp_path / "r").exists()


def test_malformed_suite_names_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    suite = tmp_path / "bad.toml"
    suite.write_text('models = ["mlp*"]\nopsets = [17, 18\n')
    line = one_line_error(capsys, "run", "--suite", str(suite), "--out", str(tmp_path / "r"))
    assert str(suite) in line and "line 2" in line


@pytest.mark.parametrize(
    ("suite", "message"),
    [
        # both used to end in a traceback
        (
            "latin1.toml",
            "latin1.toml is not UTF-8 text (byte 0xe9 on line 1); TOML files are UTF-8",
        ),
        ("protocol_number.toml", "protocol_number.toml: 'protocol' must be a table"),
    ],
)
def test_a_suite_file_of_the_wrong_encoding_or_shape_is_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, suite: str, message: str
) -> None:
    path = FIXTURES / "bad_suites" / suite
    line = one_line_error(capsys, "run", "--suite", str(path), "--out", str(tmp_path / "r"))
    assert message in line and str(path) in line
    assert not (tmp_path / "r").exists()


def test_out_holding_another_run_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "taken"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps({"schema": 1, "run_id": "someone-else"}))
    line = one_line_error(capsys, "run", "--suite", "smoke", "--out", str(out))
    assert "already holds another run" in line and "--resume" in line
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json"]


@pytest.mark.parametrize("verb", [None, *VERBS])
def test_help_is_useful(capsys: pytest.CaptureFixture[str], verb: str | None) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([verb, "--help"] if verb else ["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert "usage: harness" in text and len(text.splitlines()) > 5


def test_list_json_has_models_and_suites(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", "--json", "--zoo", str(FIXTURES / "tiny")]) == 0
    listing = json.loads(capsys.readouterr().out)
    names = {m["name"]: m for m in listing["models"]}
    assert {"name", "family", "source"} <= set(names["tiny_mlp"])
    assert names["tiny_mlp"]["source"].endswith("tiny/models.py")
    assert names["mlp_sigmoid"]["source"].startswith("builtin:")
    assert {s["name"] for s in listing["suites"]} >= {"smoke", "vision", "nlp", "audio", "seed"}


def test_broken_zoo_file_is_reported_and_others_still_load(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["list", "--zoo", str(FIXTURES / "broken")]) == 0
    out = capsys.readouterr().out
    assert "plugin_ok" in out
    assert (
        "raises_on_import.py failed to import: RuntimeError: this plugin is broken on purpose"
        in out
    )


def test_a_zoo_file_that_exits_or_names_a_model_badly_is_a_reported_problem(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """sys.exit(3) at import used to end the harness with exit 3 and no word; a name with a
    trailing newline passed the name check."""
    zoo = FIXTURES / "hostile"
    assert main(["list", "--json", "--zoo", str(zoo)]) == 0
    listing = json.loads(capsys.readouterr().out)
    names = {m["name"] for m in listing["models"]}
    assert "hostile_neighbour" in names and not [n for n in names if "\n" in n]
    assert {Path(p["source"]).name: p["error"] for p in listing["problems"]} == {
        "exits.py": "SystemExit: the file calls sys.exit(3) when imported",
        "name_newline.py": "ValueError: model name 'newline_model\\n' must match [a-z0-9_.-]+",
    }


def test_a_zoo_whose_only_file_exits_is_nothing_to_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    zoo = FIXTURES / "hostile" / "exits.py"
    line = one_line_error(capsys, "run", "--zoo", str(zoo), "--out", str(tmp_path / "r"))
    assert "1 file(s) failed to import" in line and "calls sys.exit(3)" in line


def test_an_empty_matrix_is_a_usage_error_not_a_green_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--zoo DIR` where every file fails to import would run 0 cells and exit 0, which a
    CI job reads as green."""
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "a.py").write_text("raise RuntimeError('broken on purpose')\n")
    (zoo / "b.py").write_text("import no_such_module_here\n")
    out = tmp_path / "run"
    line = one_line_error(capsys, "run", "--zoo", str(zoo), "--out", str(out))
    assert line.startswith(f"error: nothing to run: no model loaded from --zoo {zoo}; 2 file(s)")
    assert "RuntimeError: broken on purpose" in line
    assert not out.exists()


def test_dynamic_only_over_static_models_is_an_empty_matrix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "static.py").write_text(
        "import torch\nfrom harness.zoo import ModelSpec\n"
        "SPEC = ModelSpec(name='static_only', family='seed', build=torch.nn.ReLU,"
        " example_inputs=lambda: (torch.ones(2),))\n"
    )
    out = tmp_path / "run"
    line = one_line_error(capsys, "run", "--zoo", str(zoo), "--dynamic-only", "--out", str(out))
    assert "nothing to run: the selection gives an empty matrix" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("installed", "message"),
    [
        ((), "onnxruntime is not installed: install one build of it with pip install -e"),
        (("onnxruntime-gpu",), "onnxruntime does not import although onnxruntime-gpu is installed"),
    ],
)
def test_run_without_an_importable_onnxruntime_exits_2_naming_the_extra(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    installed: tuple[str, ...],
    message: str,
) -> None:
    """Neither extra installed (or a build whose files the other's uninstall removed):
    `import onnxruntime` is blocked the way Python documents (None in sys.modules)."""
    from harness.store import environment

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    monkeypatch.setattr(environment, "_installed", lambda name: name in installed)
    out = tmp_path / "run"
    line = one_line_error(capsys, "run", "--suite", "smoke", "--out", str(out))
    assert message in line and '".[cpu]"' in line and '".[gpu]"' in line
    assert not out.exists()


def test_both_onnxruntime_builds_installed_are_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.store import environment

    monkeypatch.setattr(environment, "_installed", lambda name: name == "onnxruntime")
    assert environment.onnxruntime_clash() is None
    monkeypatch.setattr(environment, "_installed", lambda name: True)
    clash = environment.onnxruntime_clash() or ""
    assert "both onnxruntime and onnxruntime-gpu are installed" in clash
    assert "pip uninstall -y onnxruntime onnxruntime-gpu" in clash


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["--out", "--keep-graphs"])
def test_a_read_only_place_for_the_run_or_its_graphs_is_exit_2_before_ray_starts(
    tmp_path: Path, flag: str
) -> None:
    """--out used to start Ray and die in an OSError traceback; --keep-graphs kept nothing."""
    read_only = tmp_path / "read-only"
    read_only.mkdir()
    target = read_only / ("graphs" if flag == "--keep-graphs" else "run")
    out = target if flag == "--out" else tmp_path / "run"
    args = ["run", "--suite", "smoke", "--out", str(out)]
    if flag == "--keep-graphs":
        args += ["--keep-graphs", str(target)]
    result = run_cli_read_only(read_only, *args)
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.splitlines() == [
        f"error: {flag} {target}: {read_only} is not writable (to make {target})"
    ]
    assert not out.exists() and list(read_only.iterdir()) == []

"""A model builder's run and what it means for the cell (harness/exporters/builder_run.py):
the verdict on hand-made runs (pure), and real programs run, timed out and measured."""

from __future__ import annotations

import re
import signal
import sys
from pathlib import Path

from harness.exporters import genai_builder, mobius
from harness.exporters.builder_run import Run, last_error, outcome, run, tail
from harness.store.status import Status

GENAI = genai_builder.PROGRAM.unsupported
MOBIUS = mobius.PROGRAM.unsupported


def _run(returncode: int | None, text: str = "") -> Run:
    return Run(returncode, 1.0, 100.0, text)


def test_a_graph_written_is_built_and_exit_zero_without_one_is_an_export_failure() -> None:
    assert outcome(_run(0), graph_written=True, unsupported=GENAI).built
    found = outcome(_run(0, "done"), graph_written=False, unsupported=GENAI)
    assert (found.built, found.status) == (False, Status.EXPORT_FAILED)
    assert found.message == "the builder exited 0 and wrote no graph\ndone"


def test_the_builders_own_refusals_are_skips_with_its_line() -> None:
    text = "Traceback ...\nNotImplementedError: The GPT2LMHeadModel model is not currently supported.\n"
    found = outcome(_run(1, text), graph_written=False, unsupported=GENAI)
    assert (
        found.skip == "NotImplementedError: The GPT2LMHeadModel model is not currently supported."
    )
    text = "KeyError: \"Unknown model_type 'lfm2'. Did you mean: 'olmo2'?\""
    assert outcome(_run(1, text), graph_written=False, unsupported=MOBIUS).skip == (
        "Unknown model_type 'lfm2'."
    )
    text = "mobius build: error: argument --dtype: invalid choice: 'int4' (choose from 'f32')"
    found = outcome(_run(2, text), graph_written=False, unsupported=MOBIUS)
    assert found.skip == "argument --dtype: invalid choice: 'int4' (choose from 'f32')"


def test_a_module_the_builder_needs_and_lacks_is_a_skip_naming_it() -> None:
    """onnxruntime-genai's wheel declares numpy and onnxruntime only; its builder imports
    onnx_ir too."""
    text = "  File x\nModuleNotFoundError: No module named 'onnx_ir'"
    found = outcome(_run(1, text), graph_written=False, unsupported=GENAI)
    assert found.skip == "the builder needs onnx_ir: pip install onnx_ir"


def test_a_timeout_a_signal_and_a_traceback_are_failures_with_the_last_lines() -> None:
    stopped = outcome(_run(None, "loading\n"), graph_written=False, unsupported=GENAI, limit_s=30)
    assert (stopped.status, stopped.message) == (
        Status.TIMEOUT,
        "the builder ran past its limit of 30 s\nloading",
    )
    killed = outcome(_run(-signal.SIGSEGV, "x"), graph_written=False, unsupported=GENAI)
    assert (killed.status, killed.message) == (
        Status.CRASHED,
        "the builder was killed by SIGSEGV\nx",
    )
    text = "Traceback (most recent call last):\n  File y\nKeyError: 'rope_type'"
    failed = outcome(_run(1, text), graph_written=False, unsupported=GENAI)
    assert failed.status is Status.EXPORT_FAILED
    assert failed.message.splitlines()[0] == "KeyError: 'rope_type'"


def test_last_error_and_tail() -> None:
    assert last_error("a\nValueError: x\n  more\n") == "ValueError: x"
    assert last_error("no error here") == ""
    assert tail("a\nprogress 10%\rprogress 100%\n\nz", lines=2) == "progress 100%\nz"


def test_a_real_program_is_run_with_its_output_exit_code_and_peak_memory(tmp_path: Path) -> None:
    script = "import sys; b = bytearray(64 * 2**20); print('hello'); sys.exit(3)"
    found = run([sys.executable, "-c", script], cwd=tmp_path, log=tmp_path / "log", timeout_s=60)
    assert (found.returncode, found.tail) == (3, "hello")
    assert found.peak_rss_mb is not None and found.peak_rss_mb > 64  # its own, with the buffer
    assert (tmp_path / "log").read_text() == "hello\n"


def test_a_program_past_its_limit_is_stopped_and_says_so(tmp_path: Path) -> None:
    script = "import time; print('started', flush=True); time.sleep(60)"
    found = run([sys.executable, "-c", script], cwd=tmp_path, log=tmp_path / "log", timeout_s=2)
    assert found.returncode is None and found.seconds < 30
    assert found.tail == "started"
    verdict = outcome(found, graph_written=False, unsupported=GENAI, limit_s=2)
    assert verdict.status is Status.TIMEOUT


def test_the_builders_environment_is_offline(tmp_path: Path) -> None:
    script = "import os; print(os.environ['HF_HUB_OFFLINE'], os.environ['TRANSFORMERS_OFFLINE'])"
    found = run([sys.executable, "-c", script], cwd=tmp_path, log=tmp_path / "log", timeout_s=60)
    assert found.tail == "1 1"


def test_the_genai_builders_invalid_combinations_are_its_own_line() -> None:
    line = "Valid precision + execution provider combinations are: FP32 CPU, FP16 CUDA, INT4 CPU"
    assert genai_builder.invalid(f"x\n{line}\n", "fp32", "cpu") is None
    assert (
        genai_builder.invalid(f"{line}\n", "fp16", "cpu") == f"fp16 on cpu is not among its {line}"
    )
    assert genai_builder.invalid("no such line", "fp16", "cpu") is None
    assert re.fullmatch(r".*-p fp32 -e cpu -c .*", " ".join(genai_builder.command(
        Path("/c"), Path("/o"), "fp32", "cpu")))  # fmt: skip


def test_a_program_killed_by_a_signal_is_a_crash(tmp_path: Path) -> None:
    script = "import os, signal; print('going', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    found = run([sys.executable, "-c", script], cwd=tmp_path, log=tmp_path / "log", timeout_s=60)
    assert found.returncode == -signal.SIGSEGV
    verdict = outcome(found, graph_written=False, unsupported=GENAI)
    assert verdict.status is Status.CRASHED
    assert verdict.message.splitlines()[0] == "the builder was killed by SIGSEGV"

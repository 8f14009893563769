"""ModelSpec's expectations: matching, and judging a record once."""

from __future__ import annotations

import torch

from harness.store.records import Cell, Measurements, Record
from harness.zoo import Expect, ModelSpec

SPEC = ModelSpec(
    name="m",
    family="seed",
    build=lambda: torch.nn.Identity(),
    example_inputs=lambda: (torch.zeros(2),),
    expect=(("torchscript-script", "cannot script"), ("dynamo/17/*/dynamic", "guard")),
)


def test_expect_patterns_match_by_part() -> None:
    e = Expect("dynamo/17/*/dynamic", "r")
    assert e.matches("dynamo", 17, "cpu", True)
    assert not e.matches("dynamo", 17, "cpu", False)
    assert not e.matches("dynamo", 18, "cpu", True)
    assert Expect("torchscript", "r").matches("torchscript", 20, "cuda", False)
    assert not Expect("torchscript", "r").matches("torchscript-script", 20, "cpu", False)


def test_judge_turns_failures_into_xfail_and_passes_into_xpass_once() -> None:
    cell = Cell("m", "torchscript-script", 18)
    failed = Record.finished(cell, "r", Measurements(), status="export_failed", stage="capture")
    passed = Record.finished(cell, "r", Measurements())
    assert SPEC.judge(failed).status == "xfail" and SPEC.judge(failed).reason == "cannot script"
    assert SPEC.judge(passed).status == "xpass"
    assert SPEC.judge(SPEC.judge(passed)).status == "xpass"  # judging twice changes nothing
    unexpected = Record.finished(
        Cell("m", "dynamo", 18), "r", Measurements(), status="export_failed"
    )
    assert SPEC.judge(unexpected).status == "export_failed"

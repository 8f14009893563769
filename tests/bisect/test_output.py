"""bisect.json and bisect.md from a hand-made result: the contract's fields, the headline
version, and text from errors kept from breaking the markdown."""

from __future__ import annotations

import json
from pathlib import Path

from harness.bisect.output import to_json, to_markdown, write_outputs
from harness.bisect.result import BisectResult, CellAnswer, Evidence, Tried
from harness.bisect.search import Judgement, Outcome, Verdict
from harness.bisect.verdict import Target
from harness.bisect.versions import Move

MOVE = Move("onnxscript", "0.6.0", "0.7.2")
STATUS = Target("status", "status_regressed", "ok -> export_failed (aten::histc | <bad>)")
LATENCY = Target("ort_latency", "paired_regressed", "ORT latency worse: x2.00")


def answer(
    label: str, target: Target, last_good: str, first_bad: str | None, **kw: object
) -> CellAnswer:
    candidates = (first_bad,) if first_bad else ("0.6.2", "0.7.0")
    outcome = Outcome(last_good, first_bad, candidates, done=True)
    return CellAnswer(label, target, MOVE.package, "the only package that moved", outcome, **kw)  # type: ignore[arg-type]


def result(*cells: CellAnswer) -> BisectResult:
    tried = (
        Tried("onnxscript-0.6.0", ("onnxscript==0.6.0",), "good", run="runs/onnxscript-0.6.0", seconds=40.0),
        Tried("onnxscript-0.6.1", ("onnxscript==0.6.1",), "bisect", skipped="pip cannot install it: no wheel", seconds=2.0),
        Tried("onnxscript-0.6.2", ("onnxscript==0.6.2",), "bisect", run="runs/onnxscript-0.6.2",
              verdicts={"m dynamo@18 cpu": Verdict("0.6.2", Judgement.BAD, "ok -> export_failed")}),
    )  # fmt: skip
    return BisectResult((MOVE,), "auto", tried, cells, ("harness", "bisect"), wall_s=123.4)


def test_json_names_the_earliest_first_bad_and_every_cell_with_its_evidence() -> None:
    evidence = Evidence({"status": "ok"}, {"status": "export_failed"}, {"Mul": [1, None]}, None)
    late = answer(
        "late dynamo@18 cpu",
        LATENCY,
        "0.7.0",
        "0.7.1",
        evidence=Evidence(paired={"ratio": 2.0, "low": 1.8, "high": 2.2, "pairs": 30}),
    )
    early = answer("m dynamo@18 cpu", STATUS, "0.6.1", "0.6.2", evidence=evidence)
    data = to_json(result(late, early))
    assert (data["package"], data["first_bad"], data["last_good"]) == (
        "onnxscript",
        "0.6.2",
        "0.6.1",
    )
    assert data["answered"] is True
    assert [t["label"] for t in data["tried"]] == [
        "onnxscript-0.6.0",
        "onnxscript-0.6.1",
        "onnxscript-0.6.2",
    ]
    assert data["tried"][1]["skipped"] == "pip cannot install it: no wheel"
    assert data["tried"][2]["verdicts"]["m dynamo@18 cpu"]["judgement"] == "bad"
    cell = data["cells"]["m dynamo@18 cpu"]
    assert cell["first_bad"] == "0.6.2" and cell["finding"]["family"] == "status"
    assert cell["evidence"]["op_count_diff"] == {"Mul": [1, None]}
    assert cell["evidence"]["first_bad_record"] == {"status": "export_failed"}
    assert data["cells"]["late dynamo@18 cpu"]["evidence"]["paired"]["ratio"] == 2.0


def test_a_graph_change_with_the_same_op_counts_shows_the_two_fingerprints() -> None:
    graph = Target("graph", "graph_changed", "graph changed (same op counts)")
    evidence = Evidence(
        {"status": "ok", "graph_fingerprint": "b9ab5cf82bc7aa"},
        {"status": "ok", "graph_fingerprint": "c44326562e95bb"},
    )
    text = to_markdown(
        result(
            answer(
                "resnet_small dynamo@18 cpu",
                graph,
                "0.7.2.dev20260714",
                "0.7.2.dev20260725",
                evidence=evidence,
            )
        )
    )
    assert (
        "| graph changed (same op counts) | onnxscript | 0.7.2.dev20260714 | 0.7.2.dev20260725 | graph b9ab5cf82bc7 -> c44326562e95 |"
        in text
    )


def test_skips_at_the_boundary_leave_no_first_bad_and_name_the_candidates() -> None:
    data = to_json(result(answer("m dynamo@18 cpu", STATUS, "0.6.0", None)))
    assert data["first_bad"] is None and data["answered"] is False
    assert data["cells"]["m dynamo@18 cpu"]["candidates"] == ["0.6.2", "0.7.0"]
    assert "one of 0.6.2, 0.7.0" in to_markdown(
        result(answer("m dynamo@18 cpu", STATUS, "0.6.0", None))
    )


def test_markdown_has_the_answer_and_keeps_error_text_inside_its_table_cell() -> None:
    text = to_markdown(result(answer("m dynamo@18 cpu", STATUS, "0.6.1", "0.6.2")))
    assert text.startswith(
        "## harness bisect (onnxscript 0.6.0 -> 0.7.2): first bad onnxscript 0.6.2 (last good 0.6.1)"
    )
    row = next(line for line in text.splitlines() if line.startswith("| m dynamo@18 cpu"))
    assert "aten::histc \\| &lt;bad>" in row
    assert row.count(" | ") == 5  # six columns, the message's pipe escaped
    assert (
        "| 2 | onnxscript==0.6.1 | bisect | skipped: pip cannot install it: no wheel | - | 2 |"
        in text
    )
    assert "3 package sets tried (2 bisection steps)" in text


def test_nothing_to_bisect_says_why(tmp_path: Path) -> None:
    r = BisectResult(
        (MOVE,), "graph", (), (), note="comparing the good and the bad set finds nothing"
    )
    paths = write_outputs(r, tmp_path / "out")
    data = json.loads(paths[0].read_text())
    assert data["first_bad"] is None and data["answered"] is False and data["cells"] == {}
    assert "comparing the good and the bad set finds nothing" in paths[1].read_text()
    assert "no first bad version found" in paths[1].read_text()

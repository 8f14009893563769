"""Which stage of a dynamo export changed the numbers, and which optimizer step did it.

A numerics mismatch is attributed to the first stage whose output differs from the one
before it, each judged by the cell's rule (its tolerance, float64 eager as the truth):

- capture: the exported program (run in torch) against eager;
- translation: the ONNX graph before optimization (the same program exported with
  `optimize=False`, run in the ONNX reference evaluator) against the program;
- optimization: the exporter's graph against the one before optimization (both in the
  reference evaluator);
- runtime: ONNX Runtime against the reference evaluator on the exporter's graph.

Where the reference evaluator cannot run a graph, ONNX Runtime stands in for it and the
runtime stage is not judged (`note` says so). Where the cell passes with `optimize=False`
and fails with the default `optimize=True` (same capture), the optimizer's steps are
bisected (`dynamo_optimizer`): the first pass whose prefix breaks the numbers, and within
a rewrite pass the first rule; the rule's name is what onnxscript writes into the
metadata of the nodes it makes (`pkg.onnxscript.rewriter.rule_name`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from harness.cell.numerics import compare_outputs
from harness.cell.reference import Reference
from harness.cell.shapes import flatten_outputs
from harness.ddmin import first_failing
from harness.exporters import dynamo_optimizer
from harness.exporters.registry_memo import memoised
from harness.exporters.request import Exported, ExportRequest, quiet
from harness.store.details import MismatchStage, StageCheck

STAGES = ("capture", "translation", "optimization", "runtime")
RULE_NAME_KEY = "pkg.onnxscript.rewriter.rule_name"


def mismatch_stage(
    request: ExportRequest,
    exported: Exported,
    reference: Reference,
    tolerance: tuple[float, float],
) -> MismatchStage:
    """The first stage that changed the numbers, each stage's check, and the optimizer's
    pass/rule where the optimizer did it; never raises."""
    try:
        return _attribute(request, exported, reference, tolerance)
    except Exception as exc:  # a diagnosis must not change the cell's verdict
        return MismatchStage(reason=f"attribution failed: {type(exc).__name__}: {exc}"[:300])


class _Judge:
    """Compares outputs by the cell's rule: eager's float64 outputs are the truth."""

    def __init__(self, reference: Reference, tolerance: tuple[float, float]) -> None:
        self.eager, self.eager64, self.tolerance = reference.outputs, reference.outputs64, tolerance

    def check(
        self, stage: str, what: str, got: list[np.ndarray], want: list[np.ndarray]
    ) -> StageCheck:
        names = [f"output_{i}" for i in range(len(want))]
        checks = compare_outputs(got, want, self.eager64, names, self.tolerance)
        sizes = [c.max_abs for c in checks if c.max_abs is not None]
        return StageCheck(
            stage=stage,
            compared=what,
            ok=all(c.ok for c in checks),
            max_abs=max(sizes) if sizes else None,
        )

    def fails_against_eager(self, got: list[np.ndarray]) -> bool:
        return not self.check("", "", got, self.eager).ok


def _attribute(
    request: ExportRequest, exported: Exported, reference: Reference, tolerance: tuple[float, float]
) -> MismatchStage:
    judge = _Judge(reference, tolerance)
    if exported.program is None:
        raise ValueError("the exporter returned no program to compare with")
    program_out = _program_outputs(exported.program, request)
    feeds = {
        n: t.detach().cpu().numpy()
        for n, t in zip(request.inputs.names(), request.inputs.leaves(), strict=True)
    }
    before = _unoptimized(exported.program, request)
    after = onnx.load(str(request.path))
    runs = _Runs(feeds)
    checks = [
        judge.check("capture", "the exported program against eager", program_out, judge.eager)
    ]
    checks += _onnx_checks(judge, runs, before, after, program_out)
    step = None
    if not judge.fails_against_eager(runs.ort(before)) and judge.fails_against_eager(
        runs.ort(after)
    ):
        step = optimizer_step(before, after, runs, judge)
    return MismatchStage(
        stage=first_changed(checks),
        checks=tuple(checks),
        optimizer_step=step,
        note="; ".join(runs.notes) or None,
    )


def first_changed(checks: Sequence[StageCheck]) -> str | None:
    """The first stage that changed the numbers beyond tolerance; where none alone did (the
    error built up), the stage with the largest change."""
    for check in checks:
        if not check.ok:
            return check.stage
    sized = [(c.max_abs, c.stage) for c in checks if c.max_abs is not None]
    return max(sized, key=lambda s: s[0])[1] if sized else None


def _onnx_checks(
    judge: _Judge,
    runs: _Runs,
    before: onnx.ModelProto,
    after: onnx.ModelProto,
    program_out: list[np.ndarray],
) -> list[StageCheck]:
    ref_before, ref_after = runs.reference(before), runs.reference(after)
    if ref_before is None or ref_after is None:
        return [
            judge.check(
                "translation",
                "ONNX before optimization (ONNX Runtime) against the program",
                runs.ort(before),
                program_out,
            ),
            judge.check(
                "optimization",
                "ONNX after against before optimization (ONNX Runtime)",
                runs.ort(after),
                runs.ort(before),
            ),
        ]
    return [
        judge.check(
            "translation",
            "ONNX before optimization (reference evaluator) against the program",
            ref_before,
            program_out,
        ),
        judge.check(
            "optimization",
            "ONNX after against before optimization (reference evaluator)",
            ref_after,
            ref_before,
        ),
        judge.check(
            "runtime", "ONNX Runtime against the reference evaluator", runs.ort(after), ref_after
        ),
    ]


def _program_outputs(
    program: torch.export.ExportedProgram, request: ExportRequest
) -> list[np.ndarray]:
    with torch.no_grad():
        out = request.inputs.call(program.module())
    return [t.detach().cpu().numpy() for t in flatten_outputs(out)]


def _unoptimized(program: torch.export.ExportedProgram, request: ExportRequest) -> onnx.ModelProto:
    """The same captured program exported with optimize=False: the graph before the optimizer."""
    with quiet(), memoised():
        onnx_program = torch.onnx.export(
            program,
            (),
            dynamo=True,
            optimize=False,
            opset_version=request.opset,
            input_names=list(request.inputs.names()),
            output_names=list(request.output_names) or None,
        )
    assert onnx_program is not None  # dynamo=True returns the ONNXProgram
    return onnx_program.model_proto


class _Runs:
    """Runs of a model in ONNX Runtime and the reference evaluator, memoised per model."""

    def __init__(self, feeds: dict[str, np.ndarray]) -> None:
        self.feeds = feeds
        self.notes: list[str] = []
        self._ort: dict[int, list[np.ndarray]] = {}
        self._reference: dict[int, list[np.ndarray] | None] = {}

    def ort(self, model: onnx.ModelProto) -> list[np.ndarray]:
        if id(model) not in self._ort:
            self._ort[id(model)] = ort_outputs(model, self.feeds)
        return self._ort[id(model)]

    def reference(self, model: onnx.ModelProto) -> list[np.ndarray] | None:
        def run() -> list[np.ndarray] | None:
            from onnx.reference import ReferenceEvaluator

            try:
                evaluator = ReferenceEvaluator(model)
                wanted = {i.name for i in model.graph.input}
                return list(
                    evaluator.run(None, {k: v for k, v in self.feeds.items() if k in wanted})
                )
            except Exception as exc:
                self.notes.append(
                    f"the ONNX reference evaluator cannot run the graph ({type(exc).__name__}: "
                    f"{str(exc)[:120]}): ONNX Runtime judged translation and optimization, the runtime was not judged"
                )
                return None

        if id(model) not in self._reference:
            self._reference[id(model)] = run()
        return self._reference[id(model)]


def ort_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model.SerializeToString(), options, ["CPUExecutionProvider"])
    wanted = {i.name for i in session.get_inputs()}
    return list(session.run(None, {k: v for k, v in feeds.items() if k in wanted}))


# -- the optimizer step ---------------------------------------------------------------------------


def optimizer_step(
    before: onnx.ModelProto, after: onnx.ModelProto, runs: _Runs, judge: _Judge
) -> dict[str, object]:
    """Bisect the optimizer's steps (then a rewrite pass's rules) for the first that makes
    the numbers fail against eager."""
    steps = dynamo_optimizer.steps()
    if steps is None:
        return {"reason": "the exporter calls an optimizer whose steps this harness does not know"}
    from onnxscript import ir

    def applied(chosen: list[dynamo_optimizer.Step]) -> onnx.ModelProto:
        model = ir.serde.deserialize_model(before)
        for step in chosen:
            step.apply(model)
        return ir.serde.serialize_model(model)

    def fails(chosen: list[dynamo_optimizer.Step]) -> bool:
        return judge.fails_against_eager(ort_outputs(applied(chosen), runs.feeds))

    found = first_failing(len(steps), lambda k: fails(steps[:k]))
    result: dict[str, object] = {"steps": len(steps), "tests": found.tests}
    result["replica_exact"] = _same_graph(applied(steps), after)
    if found.first is None:
        return {
            **result,
            "reason": "the optimizer's steps, applied here one by one, keep the numbers right",
        }
    step, rule_name = steps[found.first - 1], None
    result["pass"] = step.name
    if step.rules:
        earlier = steps[: found.first - 1]
        rule = first_failing(len(step.rules), lambda j: fails([*earlier, step.with_rules(j)]))
        result["tests"] = found.tests + rule.tests
        if rule.first is not None:
            result["rule"] = rule_name = dynamo_optimizer.rule_name(step.rules[rule.first - 1])
    result["nodes"] = _nodes_made_by(after, rule_name)
    return result


def _same_graph(a: onnx.ModelProto, b: onnx.ModelProto) -> bool:
    """Equal graph fingerprints (names and metadata aside)."""
    from harness.cell.fingerprint import graph_fingerprint

    with tempfile.TemporaryDirectory(prefix="harness-replica-") as tmp:
        paths = [Path(tmp) / "a.onnx", Path(tmp) / "b.onnx"]
        for model, path in zip((a, b), paths, strict=True):
            onnx.save(model, str(path))
        return bool(graph_fingerprint(paths[0]) == graph_fingerprint(paths[1]))


def _nodes_made_by(model: onnx.ModelProto, rule: str | None) -> list[str]:
    """The exporter's graph's nodes that the rule made, by their metadata (first 10)."""
    if rule is None:
        return []
    made = [
        n.name
        for n in model.graph.node
        if any(p.key == RULE_NAME_KEY and p.value == rule for p in n.metadata_props)
    ]
    return made[:10]

"""One cell's minimal repro, in the process that runs it (a fresh one: `child`).

The model is built as the cell built it and exported again with the dynamo exporter's
real call, which gives the program torch.export captured, after the exporter's
decompositions (the one it translates, whose node names the ONNX graph and the errors
use; the captured one where decomposition failed). Then, within the time bound: growing
rings of nodes around the node the failure names, until one still fails the cell's way
(`oracle`), then delta debugging down to a 1-minimal set; the result becomes
`repro_min.py`. TorchScript cells shrink the same program with the TorchScript exporter
as the oracle. A failure where nothing was captured falls back to the facts the record
holds, and says so.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import onnx
import torch

from harness import exporters
from harness.cell import failures
from harness.cell.dynamic import verification_shapes
from harness.cell.numerics import DEFAULT_TOLERANCE, tolerance_at
from harness.cell.precision import cast_inputs, cast_model
from harness.cell.reference import build
from harness.cell.shapes import Inputs
from harness.cell.stages import StageFailure
from harness.ddmin import ddmin
from harness.exporters.request import ExportRequest
from harness.repro import module_script, modules, script
from harness.repro.job import Job, Summary, relative
from harness.repro.oracle import Target, reproduces
from harness.repro.program import Program
from harness.repro.select import kind_of
from harness.runtime.worker import find_spec
from harness.store.details import Divergence
from harness.store.error_text import signature_of
from harness.store.records import Record
from harness.store.status import Stage
from harness.zoo.spec import SEED, DynamicShapes

PROGRAM = "the program torch.export captured (after the dynamo exporter's decompositions)"
CAPTURED = "the program torch.export captured"
METHOD = "graph"  # delta debugging over the program torch.export captured
NOTHING_CAPTURED = "the exporter captured no program, so there is no graph to shrink"
NO_MAPPING = "TorchScript writes no node mapping: no first divergent node to end a subgraph at"
NOT_FROM_CODE = (
    "the whole program, written out as code and exported again, does not fail this way: the"
    " failure depends on how torch.export traced the model (the strides or metadata it"
    " recorded), not only on the ops it calls"
)
NOT_FROM_TRACE = (
    "the program torch.export captured, written out as code and exported with the"
    " TorchScript exporter, does not fail this way: the failure lies in the tracer's own"
    " graph of the model, which this minimizer does not shrink"
)
CAPTURED_WRONG = (
    "capture changed the numbers: the exported program itself differs from eager and every"
    " ONNX node follows it, so no subgraph of it shows the mismatch (the model computes"
    " something else under torch.export or torch.onnx.is_in_onnx_export())"
)


@dataclass
class Subject:
    """What the cell exported: the model, its inputs and the tolerance it was judged by."""

    model: torch.nn.Module
    inputs: Inputs
    tolerance: tuple[float, float]
    sample: int | None = None
    # A dynamic cell's inputs at its first verification shape, and its dynamic shapes.
    dynamic: tuple[Inputs, DynamicShapes] | None = None


def minimize(job: Job) -> Summary:
    """The cell's minimal repro, written into its artifacts folder; never raises."""
    start = time.monotonic()
    record = Record.from_dict(job.record)
    kind = kind_of(record) or "unknown"
    try:
        summary = _minimize(job, record, kind, start)
    except Exception as exc:  # the minimizer's own failure is a reason, not a crash
        summary = Summary(
            kind, METHOD, reason=f"minimizer failed: {type(exc).__name__}: {exc}"[:500]
        )
    return _timed(summary, start, job.bound_s)


def _timed(summary: Summary, start: float, bound_s: float) -> Summary:
    d = summary.to_dict()
    d.update(seconds=round(time.monotonic() - start, 2), bound_s=bound_s)
    return Summary.from_dict(d)


def _minimize(job: Job, record: Record, kind: str, start: float) -> Summary:
    if record.stage is Stage.CAPTURE:
        return _captured_nothing(job, record, kind, start)
    if kind == "numerics" and _stage_of(record) == "capture":
        return _by_module(job, record, kind, _subject(job, record), start, CAPTURED_WRONG)
    if kind == "numerics" and not record.exporter.startswith("dynamo"):
        return _by_module(job, record, kind, _subject(job, record), start, NO_MAPPING)
    subject = _subject(job, record)
    target = _target(record, subject)
    workdir = Path(tempfile.mkdtemp(prefix="harness-repro-"))
    try:
        dynamo = record.exporter.startswith("dynamo")
        exported, failure = _export(subject, record.opset, workdir / "full", captured=not dynamo)
        if exported is None:  # torch.export captures nothing of a TorchScript cell's model
            return _captured_nothing(job, record, kind, start, now=failure)
        target = _as_raised(target, failure)
        program = Program(exported, subject.inputs.leaves())
        focus = _focus(program, target, record, failure, workdir / "full" / "model.onnx")
        deadline = start + job.bound_s
        found = _search(program, target, focus, workdir / "candidate", deadline)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if found.kept is None and found.reason in (NOT_FROM_CODE, NOT_FROM_TRACE):
        return _by_module(job, record, kind, subject, start, found.reason)
    return _write(job, record, kind, program, target, found)


def _captured_nothing(
    job: Job, record: Record, kind: str, start: float, *, now: BaseException | None = None
) -> Summary:
    """Nothing captured (the cell's capture failed, or torch.export's of a TorchScript
    cell's model, `now`): the module-level minimizer, else the record's facts."""
    try:
        summary = _by_module(job, record, kind, _subject(job, record), start, NOTHING_CAPTURED)
    except Exception as exc:  # an OpInfo sample's model, say: the record's facts stand
        summary = Summary(kind, "none", reason=f"module level: {type(exc).__name__}: {exc}")
    if summary.script is not None:
        return summary
    facts = fallback(record, now=now)
    tried = (summary.reason or "").removeprefix(f"{NOTHING_CAPTURED}; ")
    return _with(facts, reason=f"{facts.reason}; {tried}"[:1000])


def _by_module(
    job: Job, record: Record, kind: str, subject: Subject, start: float, why: str
) -> Summary:
    """The module-level minimizer (`modules`), for a failure the graph one cannot take."""
    numerics = record.stage is Stage.NUMERICS
    assert record.stage is not None
    signature = None if numerics else record.error_signature
    target = Target(record.exporter, record.opset, record.stage, signature, None, subject.tolerance)
    workdir = Path(tempfile.mkdtemp(prefix="harness-repro-module-"))
    try:
        outcome = modules.minimize_module(
            subject.model, subject.inputs, target, workdir, start + job.bound_s, subject.dynamic
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    base = Summary(
        kind,
        "module",
        params_before=outcome.params_before,
        depth_before=outcome.depth_before,
        target=outcome.target.signature,
    )
    kept = outcome.kept
    if kept is None or outcome.module is None or outcome.call is None:
        return _with(base, reason=f"{why}; module level: {outcome.reason}")
    folder = Path(job.run_dir) / "artifacts" / record.cell.cell_id
    about = module_script.Kept(
        record.cell.label(),
        record.run_id,
        kept.path,
        outcome.params_before,
        modules.parameters(outcome.module),
        len(kept.replaced),
    )
    try:
        module_script.write(folder, outcome.module, outcome.call, outcome.target, about)
    except Exception as exc:  # a class no script can define, a module torch.save cannot pickle
        why_not = f"no standalone script: {type(exc).__name__}: {exc}"[:500]
        return _with(base, module=kept.path, reason=why_not)
    return _with(
        base,
        module=kept.path,
        module_class=type(outcome.module).__qualname__,
        params_after=about.params_after,
        depth_after=modules.height(outcome.module),
        replaced=kept.replaced,
        tests=kept.tests,
        search_complete=kept.complete,
        reason=why,
        script=relative(folder / script.SCRIPT, job.run_dir),
        inputs=relative(folder / script.INPUTS, job.run_dir),
    )


def _subject(job: Job, record: Record) -> Subject:
    spec = find_spec(job.source, record.model)
    if spec.samples is None:  # the model as the cell ran it, at the cell's dtype
        model, inputs = build(spec, "cpu")
        dtype = record.cell.dtype
        at = tolerance_at(dtype, spec.tolerance)
        dynamic = None
        if record.cell.dynamic and spec.dynamic_shapes is not None:
            second = verification_shapes(spec, model, inputs)[0][1]
            dynamic = (cast_inputs(second, dtype), spec.dynamic_shapes)
        return Subject(cast_model(model, dtype), cast_inputs(inputs, dtype), at, dynamic=dynamic)
    index = _failing_sample(record)
    sample = next(s for s in spec.samples().samples if s.index == index)
    assert sample.build is not None, f"sample {index} has no model"
    torch.manual_seed(SEED)
    model = sample.build().eval()
    inputs = Inputs(tuple(sample.inputs), {}, ())
    return Subject(model, inputs, sample.tolerance or DEFAULT_TOLERANCE, index)


def _failing_sample(record: Record) -> int:
    """The sample whose failure the record carries: the located one for numerics, else
    the first failing sample with the record's signature."""
    found = record.numerics.first_divergence
    located = None if found is None else found.sample
    failures = [] if record.samples is None else list(record.samples.failures or ())
    if record.stage is Stage.NUMERICS and located is not None:
        return located
    same = [f for f in failures if f.error_signature == record.error_signature]
    return (same or failures)[0].index


def _stage_of(record: Record) -> str | None:
    """The stage that changed the numbers of a mismatch, where one was named."""
    found = record.numerics.mismatch_stage
    return None if found is None else found.stage


def _target(record: Record, subject: Subject) -> Target:
    assert record.stage is not None
    node = None
    if record.stage is Stage.NUMERICS:
        found = record.numerics.first_divergence or Divergence()
        node = found.fx_node or found.output
        if not node and (found.node or "").startswith("node_"):
            node = (found.node or "")[len("node_") :]
        if not node:
            raise LookupError(f"no first divergent node to end the subgraph at: {found.reason}")
    signature = None if record.stage is Stage.NUMERICS else record.error_signature
    return Target(record.exporter, record.opset, record.stage, signature, node, subject.tolerance)


def _as_raised(target: Target, failure: StageFailure | None) -> Target:
    """The target's signature as the exporter raises it: a record's signature may be the
    classified one (`harness.cell.failures`), which a candidate's raw error and the
    standalone script's own check would never match."""
    if failure is None or target.signature is None or failure.stage is not target.stage:
        return target
    if failures.signature(failure.error) != target.signature:
        return target
    return replace(target, signature=signature_of(failure.error))


def _export(
    subject: Subject, opset: int, workdir: Path, *, captured: bool
) -> tuple[Any, StageFailure | None]:
    """The dynamo exporter's real call: the program it translated (or got furthest with
    where it failed), or with `captured` the one torch.export captured, before the
    exporter's decompositions (what the TorchScript exporter would see: aten.diff, not
    the slices it decomposes into); None where capture failed."""
    workdir.mkdir(parents=True)
    request = ExportRequest(subject.model, subject.inputs, opset, workdir / "model.onnx")
    try:
        exported = exporters.get("dynamo").export(request)
    except StageFailure as failure:
        return failure.details.get("captured" if captured else "program"), failure
    return exported.captured if captured else exported.program, None


_FX_NAME = re.compile(r"%(\w+)")
_ONNX_NODE = re.compile(r"(?:node name: |Name:')([\w./\-]+)")
_TS_OP = re.compile(r"'(aten|prim)::(\w+)'")


def _focus(
    program: Program, target: Target, record: Record, failure: StageFailure | None, onnx_path: Path
) -> list[str]:
    """The nodes the failure names: the divergent node; FX nodes in the error; nodes whose
    op the error or the record names; ONNX nodes in the error, through their metadata."""
    if target.node is not None:
        return [target.node]
    text = " ".join([record.error_message or "", *_messages(failure)])
    named = {n for n in _FX_NAME.findall(text) if n in program.nodes}
    ops = {*(record.export.unsupported_ops or ()), *(f"{a}.{b}" for a, b in _TS_OP.findall(text))}
    for name, node in program.nodes.items():
        op = str(node.target)
        if op in text or any(op == u or op.startswith(u + ".") for u in ops):
            named.add(name)
    named |= {n for n in _onnx_to_fx(onnx_path, _ONNX_NODE.findall(text)) if n in program.nodes}
    return list(program.dag.sorted(named))


def _messages(error: BaseException | None) -> list[str]:
    found, seen = [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        found.append(str(error))
        error = (
            error.error if isinstance(error, StageFailure) else error.__cause__ or error.__context__
        )
    return found


def _onnx_to_fx(path: Path, onnx_nodes: list[str]) -> list[str]:
    """The FX nodes that ONNX nodes came from (the exporter writes it in their metadata)."""
    if not onnx_nodes or not path.is_file():
        return []
    model = onnx.load(str(path), load_external_data=False)
    found = []
    for node in model.graph.node:
        if node.name in onnx_nodes:
            meta = {p.key: p.value for p in node.metadata_props}
            found += _FX_NAME.findall(meta.get("pkg.torch.onnx.fx_node", ""))[:1]
    return found


@dataclass(frozen=True)
class Found:
    kept: tuple[str, ...] | None
    tests: int
    complete: bool
    reason: str | None = None


def _search(
    program: Program, target: Target, focus: list[str], workdir: Path, deadline: float
) -> Found:
    """Rings around the focus until one fails the cell's way, then ddmin inside it."""
    outputs = (target.node,) if target.node else None
    out_of_time: Callable[[], bool] = lambda: time.monotonic() > deadline  # noqa: E731

    def fails(kept: tuple[str, ...]) -> bool:
        try:
            return reproduces(program.candidate(kept, outputs), target, workdir)
        except Exception:  # a candidate that cannot even be built or run is no repro
            return False

    tests = 0
    for ring in program.dag.rings(focus, upstream_only=target.numerics):
        if out_of_time():
            return Found(None, tests, False, "the time bound ran out before any candidate failed")
        tests += 1
        if fails(ring):
            keep = [target.node] if target.node else []
            shrunk = ddmin(
                [n for n in ring if n not in keep], fails, keep=keep, out_of_time=out_of_time
            )
            return Found(shrunk.kept, tests + shrunk.tests, shrunk.complete)
    why = NOT_FROM_CODE if target.exporter.startswith("dynamo") else NOT_FROM_TRACE
    return Found(None, tests, True, why)


def _write(
    job: Job, record: Record, kind: str, program: Program, target: Target, found: Found
) -> Summary:
    base = Summary(
        kind,
        METHOD,
        nodes_before=program.size,
        tests=found.tests,
        search_complete=found.complete,
        target=target.signature or f"node {target.node}",
    )
    if found.kept is None:
        return _with(base, reason=found.reason)
    candidate = program.candidate(found.kept, (target.node,) if target.node else None)
    folder = Path(job.run_dir) / "artifacts" / record.cell.cell_id
    about = script.About(
        record.cell.label(),
        record.run_id,
        len(candidate.nodes),
        program.size,
        PROGRAM if record.exporter.startswith("dynamo") else CAPTURED,
    )
    try:
        imports = script.write(folder, candidate, target, about)
    except script.NotStandalone as exc:
        return _with(base, nodes_after=len(candidate.nodes), reason=f"no standalone script: {exc}")
    return _with(
        base,
        nodes_after=len(candidate.nodes),
        imports=imports,
        script=relative(folder / script.SCRIPT, job.run_dir),
        inputs=relative(folder / script.INPUTS, job.run_dir),
    )


def _with(summary: Summary, **changes: Any) -> Summary:
    return Summary.from_dict({**summary.to_dict(), **changes})


def fallback(record: Record, *, now: BaseException | None = None) -> Summary:
    """Nothing captured: the op and inputs the record names, and that this is all."""
    facts = []
    metadata = record.metadata or {}
    op = (
        metadata.get("aten_name")
        or metadata.get("opinfo")
        or ", ".join(record.export.unsupported_ops or ())
    )
    if op:
        facts.append(f"op {op}")
    listed = () if record.samples is None else record.samples.failures or ()
    failing = [f for f in listed if f.inputs]
    if failing:
        facts.append(f"inputs {failing[0].inputs}")
    what = "; ".join(facts) or "no op or input shapes in the record"
    why = NOTHING_CAPTURED
    if now is not None:
        why += f" (exported again here: {signature_of(now)})"
    return Summary("capture", "none", reason=f"{why}; from the record: {what}")

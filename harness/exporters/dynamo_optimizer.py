"""The dynamo exporter's optimizer as a sequence of named steps, to find the one that
changes a model's numbers (as Inductor's CompilerBisector does for its passes).

`torch.onnx.export(..., optimize=True)` calls `ONNXProgram.optimize`, which calls
onnxscript's `optimize` for torch (in onnxscript 0.7: `optimizer.optimize_ir(model)` then
`rewriter.onnx_fusions.fuse(model)`). `steps()` lays the same passes out one by one, in
their order (the fixed-point loop of constant folding, the rewrite rules and the cleanup
passes unrolled into its iterations), each rewrite pass with the rules it applies, read
from onnxscript at call time as `optimize_ir` reads them. Whether this layout still is the
installed optimizer is checked on each use: all steps applied must give exactly the graph
the exporter gave (`harness.exporters.dynamo_stages`); `steps()` gives None where the
exporter calls an optimizer this module does not know.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnx_ir import Model
    from onnx_ir.passes import PassBase
    from onnxscript.rewriter.pattern import RewriteRule

ITERATIONS = 2  # optimize_ir's num_iterations default


@dataclass(frozen=True)
class Step:
    """One pass of the optimizer; a rewrite pass lists its rules to bisect within."""

    name: str
    apply: Callable[[Model], None]  # in place
    rules: Sequence[RewriteRule] = ()

    def with_rules(self, count: int) -> Step:
        """This rewrite pass with only its first `count` rules."""
        from onnxscript import rewriter

        chosen = tuple(self.rules[:count])
        return Step(
            f"{self.name} (first {count} rules)", _fresh(lambda: rewriter.RewritePass(chosen))
        )


def _fresh(make_pass: Callable[[], PassBase]) -> Callable[[Model], None]:
    """Apply a new instance of the pass each time (passes keep state while they run)."""

    def apply(model: Model) -> None:
        make_pass()(model)

    return apply


def _known_entry_point() -> bool:
    """The exporter optimizes with onnxscript's optimize-for-torch of 0.7 (optimize_ir,
    then the ONNX fusions)."""
    try:
        from onnxscript._framework_apis import torch_2_8
        from torch.onnx._internal.exporter import _core
    except ImportError:
        return False
    apis = getattr(_core, "onnxscript_apis", None)  # torch's private lazy module
    return getattr(apis, "optimize", None) is torch_2_8.optimize


def steps() -> list[Step] | None:
    if not _known_entry_point():
        return None
    import onnx_ir.passes.common as common
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding as folding

    rules = tuple(rewriter._DEFAULT_REWRITE_RULES)  # read now, as optimize_ir reads it

    def fold() -> PassBase:
        return folding.FoldConstantsPass(
            shape_inference=True,
            input_size_limit=folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
            output_size_limit=folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
        )

    found = [Step("InlinePass", _fresh(common.InlinePass))]
    for i in range(1, ITERATIONS + 1):
        found += [
            Step(f"FoldConstantsPass (iteration {i})", _fresh(fold)),
            Step(
                f"RewritePass (iteration {i})", _fresh(lambda: rewriter.RewritePass(rules)), rules
            ),
            *_cleanup(common, ("RemoveUnusedNodesPass", "RemoveUnusedFunctionsPass"), i),
            *_cleanup(common, ("RemoveUnusedOpsetsPass",), i),
        ]
    found += _final(common)
    found += _fusions()
    return found


def _cleanup(common: ModuleType, names: tuple[str, ...], iteration: int) -> list[Step]:
    return [Step(f"{n} (iteration {iteration})", _fresh(getattr(common, n))) for n in names]


def _final(common: ModuleType) -> list[Step]:
    return [
        Step("RemoveUnusedNodesPass", _fresh(common.RemoveUnusedNodesPass)),
        Step(
            "LiftConstantsToInitializersPass",
            _fresh(
                lambda: common.LiftConstantsToInitializersPass(
                    lift_all_constants=True, size_limit=0
                )
            ),
        ),
        *(
            Step(name, _fresh(getattr(common, name)))
            for name in (
                "LiftSubgraphInitializersToMainGraphPass",
                "DeduplicateInitializersPass",
                "CommonSubexpressionEliminationPass",
                "OutputFixPass",
                "NameFixPass",
            )
        ),
    ]


def _fusions() -> list[Step]:
    """onnx_fusions.fuse: at opset 23 only, three fusions in this order."""
    from onnxscript.rewriter.rules.fusion import _gqa, _rms_normalization, _rotary_embedding

    def at_opset_23(fuse: Callable[[Model], object]) -> Callable[[Model], None]:
        def apply(model: Model) -> None:
            if (model.opset_imports.get("") or model.opset_imports.get("ai.onnx")) == 23:
                fuse(model)

        return apply

    return [
        Step(
            "onnx_fusions: RMSNormalization", at_opset_23(_rms_normalization.fuse_rms_normalization)
        ),
        Step("onnx_fusions: RotaryEmbedding", at_opset_23(_rotary_embedding.fuse_rotary_embedding)),
        Step("onnx_fusions: GQA", at_opset_23(_gqa.fuse_gqa)),
    ]


def rule_name(rule: object) -> str:
    return str(getattr(rule, "name", None) or rule)

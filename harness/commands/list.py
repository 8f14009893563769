"""`harness list`: the zoo's models, the suites, the exporters and the patches."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from harness import exporters
from harness.exporters import patches
from harness.plan.suites import available_suites, load_suite
from harness.store.axes import LIST_AXES
from harness.zoo import Expect, ModelSpec
from harness.zoo.discovery import BUILTIN_ZOO, discover
from harness.zoo.expect import normalize

HELP = "list models and suites"
DESCRIPTION = """\
List the zoo (built-in models, --zoo paths and installed harness.zoo plugins), the
suites, the exporters (--exporters) and the export-time patches (--patches). With --suite, only the models that suite selects. Models that cannot run here
(a library that does not import, an architecture that does not build) are counted and
grouped by reason at the end: their cells are recorded as skipped with that reason.

examples:
  harness list
  harness list --suite vision
  harness list --suite transformers              # how many build, and why the others do not
  harness list --zoo ./my_zoo --json
  harness list --suite opinfo --json     # each entry's OpInfo name and dtype
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", metavar="NAME|PATH.toml", help="only the models this suite selects")
    p.add_argument(
        "--zoo",
        action="append",
        default=[],
        metavar="PATH",
        help="add zoo entry files (repeatable)",
    )
    p.add_argument(
        "--json", action="store_true", help='machine-readable: {"models": [...], "suites": [...]}'
    )


def _origin(spec: ModelSpec) -> str:
    if spec.source.startswith("entry-point:"):
        return spec.source
    path = Path(spec.source)
    try:
        return "builtin:" + str(path.relative_to(BUILTIN_ZOO))
    except ValueError:
        return str(path)


def _model_row(spec: ModelSpec) -> dict[str, object]:
    row: dict[str, object] = {
        "name": spec.name,
        "family": spec.family,
        "tags": list(spec.tags),
        "dynamic": spec.dynamic_shapes is not None,
        "sampled": spec.samples is not None,
        "expected_failures": [_expect_row(e) for e in normalize(spec.expect)],
        "source": _origin(spec),
        "description": spec.description,
        "skip_reason": spec.missing_requirement(),
    }
    # The entry's own facts (an OpInfo entry's `opinfo`, `variant`, `dtype`, ...), beside
    # the fields above and never over them.
    return {**row, **{k: v for k, v in spec.metadata.items() if k not in row}}


def _expect_row(e: Expect) -> dict[str, object]:
    cells = {k: getattr(e, k) for k in ("exporter", "opset", "device", "shape", "variant")}
    return {
        **{k: v for k, v in cells.items() if v != "*"},
        "status": None if e.status is None else str(e.status),
        "stage": None if e.stage is None else str(e.stage),
        "match": e.match,
        "expects": e.describe(),
        "reason": e.reason,
        "expires": e.expires.isoformat() if e.expires else None,
    }


def main(args: argparse.Namespace) -> int:
    zoo = discover([Path(p) for p in args.zoo])
    models = list(zoo.models.values())
    if args.suite:
        models = zoo.select(load_suite(args.suite).models)
    suites = [_suite_row(name) for name in available_suites()]
    if args.json:
        print(
            json.dumps(
                {
                    "models": [_model_row(m) for m in models],
                    "suites": suites,
                    "exporters": _exporter_rows(),
                    "patches": _patch_rows(),
                    "problems": [vars(p) for p in zoo.problems],
                },
                indent=2,
            )
        )
        return 0
    print(f"{len(models)} models")
    for m in models:
        dyn = "dynamic" if m.dynamic_shapes is not None else "static"
        print(f"  {m.name:<26} {m.family:<8} {dyn:<8} {_origin(m)}")
    print("\n".join(skip_summary(models)))
    print(f"\n{len(suites)} suites")
    for s in suites:
        print(f"  {s['name']:<12} {s['description']}")
    print("\nexporters (--exporters)")
    for exporter in _exporter_rows():
        print(f"  {exporter['name']:<24} {exporter['description']}")
    print("\npatches (--patches; `none` is the plain export call)")
    for row in _patch_rows():
        print(f"  {row['name']:<24} {row['description']}")
    for p in zoo.problems:
        print(f"\nwarning: zoo file {p.source} failed to import: {p.error}")
    return 0


SHOWN_REASONS = 25


def skip_summary(models: list[ModelSpec]) -> list[str]:
    """'N of M models run here; K are skipped:' and the reasons, most common first."""
    reasons = Counter(r for m in models if (r := m.missing_requirement()) is not None)
    if not reasons:
        return []
    skipped = sum(reasons.values())
    lines = [
        f"\n{len(models) - skipped} of {len(models)} models run here; {skipped} are skipped "
        f"(their cells are recorded as skipped with the reason), by reason:"
    ]
    for reason, count in reasons.most_common(SHOWN_REASONS):
        lines.append(f"  {count:>4}  {reason[:150]}")
    rest = reasons.most_common()[SHOWN_REASONS:]
    if rest:
        lines.append(
            f"  {sum(n for _, n in rest):>4}  ... {len(rest)} other reasons (`--json`: each model's skip_reason)"
        )
    return lines


def _suite_row(name: str) -> dict[str, object]:
    suite = load_suite(name)
    return {
        "name": name,
        "description": suite.description,
        "models": list(suite.models),
        "exporters": list(suite.exporters),
        "opsets": {e: list(suite.opsets_for(e)) for e in suite.exporters},
        "dynamic": suite.dynamic.json,
        **{str(a.plural): [a.text(v) for v in suite.values(a)] for a in LIST_AXES},
    }


def _patch_rows() -> list[dict[str, str]]:
    return [{"name": p.name, "description": p.description} for p in patches.REGISTRY.values()]


def _exporter_rows() -> list[dict[str, object]]:
    return [
        {
            "name": e.name,
            "description": e.description,
            "opsets": [e.min_opset, e.max_opset],
            "in_process": e.in_process,
        }
        for e in exporters.REGISTRY.values()
    ]

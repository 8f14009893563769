"""The README's figures of transformers' exporter over the decode suite (issue 40), from a run
of the `transformers-decode` suite (and, optionally, a run of its `transformers` cells with
`--ort-opt fusions`), measured, not enforced:

- per architecture (a decode entry that builds): exported and right by the bare dynamo call
  (plain), only with the `sliding-window` patch, by transformers' exporter, and fused for
  ORT; how many only transformers' exporter exports;
- per exporter: cells generated token by token and how many gave eager's 16 greedy tokens
  (a near-tie counted apart);
- the debt list, where `harness debt` searched the run: per workaround, the architectures
  that still need it and those it is obsolete for.

    PYTHONPATH=. python benchmarks/decode_figures.py RUN_DIR [FUSED_RUN_DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from harness.report.hf import by_workaround
from harness.report.layout import unique_cells
from harness.store import rundir
from harness.store.records import Record


def _passes(records: Sequence[Record], model: str, exporter: str, patch: str = "none") -> bool:
    return any(
        r.model == model and r.exporter == exporter and r.patch == patch and r.status.exported
        for r in records
    )


def architectures(records: Sequence[Record], fused: Sequence[Record] = ()) -> list[str]:
    models = sorted({r.model for r in records if r.status.applies})
    counts: Counter[str] = Counter()
    for m in models:
        bare = _passes(records, m, "dynamo")
        patched = _passes(records, m, "dynamo", "sliding-window")
        hf = _passes(records, m, "transformers")
        counts["bare dynamo call"] += bare
        counts["dynamo, only with the sliding-window patch"] += patched and not bare
        counts["transformers' exporter"] += hf
        counts["only transformers' exporter"] += hf and not (bare or patched)
        counts["neither"] += not (bare or patched or hf)
        if fused:
            counts["transformers' exporter, fused for ORT"] += _passes(fused, m, "transformers")
    lines = [f"{len(models)} architectures (decode entries that build and step)", ""]
    lines += ["| exported and right | architectures |", "|---|---|"]
    lines += [f"| {k} | {n} |" for k, n in counts.items()]
    return lines


def generation(records: Sequence[Record]) -> list[str]:
    lines = ["| exporter | patch | ORT optimisation | generated | 16/16 tokens | tie | differ |"]
    lines.append("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str, str], list[Record]] = {}
    for r in records:
        if r.numerics.generation is not None:
            groups.setdefault((r.exporter, r.patch, r.ort_opt.value), []).append(r)
    for (exporter, patch, opt), rs in sorted(groups.items()):
        gens = [r.numerics.generation for r in rs if r.numerics.generation is not None]
        same = sum(g.agree == g.new_tokens for g in gens)
        tie = sum(g.agree < g.new_tokens and g.tie_gap is not None for g in gens)
        lines.append(
            f"| {exporter} | {patch} | {opt} | {len(gens)} | {same} | {tie} | {len(gens) - same - tie} |"
        )
    return lines


def debt(records: Sequence[Record]) -> list[str]:
    """Per workaround, the architectures (and cells) that need it and those it is obsolete
    for (a cell under the harness's own patch may not need what the plain cell needs)."""
    searched = [r for r in records if r.workarounds is not None]
    needing, obsolete_for = by_workaround(searched)
    needed = defaultdict(list, {n: [r.model for r in cells] for n, cells in needing.items()})
    obsolete = defaultdict(list, {n: [r.model for r in cells] for n, cells in obsolete_for.items()})
    still = sorted(needed, key=lambda n: (-len(needed[n]), n))
    lines = [
        f"{len(searched)} cells searched ({len({r.model for r in searched})} architectures);"
        f" {len(still)} workarounds still needed,"
        f" {len(set(obsolete) - set(needed))} obsolete for every architecture that used them",
        "",
        "| workaround | needed by: architectures (cells) | obsolete for | needed by |",
        "|---|---|---|---|",
    ]
    every = sorted(
        set(needed) | set(obsolete), key=lambda n: (-len(needed[n]), -len(obsolete[n]), n)
    )
    for n in every:
        few = ", ".join(sorted(set(needed[n]))) if 0 < len(set(needed[n])) <= 5 else ""
        lines.append(
            f"| `{n}` | {_models_and_cells(needed[n])} | {_models_and_cells(obsolete[n])} | {few} |"
        )
    return lines


def _models_and_cells(models: list[str]) -> str:
    return f"{len(set(models))} ({len(models)})" if models else "0"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", type=Path)
    p.add_argument("fused", type=Path, nargs="?")
    args = p.parse_args(argv)
    records = unique_cells(rundir.read_records(args.run))
    fused = unique_cells(rundir.read_records(args.fused)) if args.fused else []
    for lines in (architectures(records, fused), generation([*records, *fused]), debt(records)):
        print("\n".join(lines), end="\n\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

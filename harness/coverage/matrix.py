"""Op coverage (issue 5): which ATen ops each exporter handles, at each opset.

A matrix op x (exporter, opset) of states, from whichever evidence a run holds:

- op cells (family `ops`, one op per model, harness/ops.py): the cell's own status, so
  `ok` (exports, checks, runs in ORT and matches eager), `wrong` (exports, wrong numbers)
  or `fails` (export, checker or ORT fails, with the error signature);
- model cells: an op is `ok` where a cell that passed used it, `fails` where it is in a
  cell's `unsupported_ops`, and `unknown` where it only appears in cells that failed for
  some other reason;
- OpInfo cells (family `opinfo`, one OpInfo at one dtype): rows are OpInfos (torch's
  names), columns carry the dtype, and each state carries how many of the cell's samples
  matched eager; `ok` means every sample that could run matched.

Dynamo records name overloads ('aten.add.Tensor'); TorchScript graphs name none
('aten.add'), so a TorchScript op counts for every overload of its packet the run has
seen. Pure over records, like the comparison that uses it: no torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from harness.store.records import Cell, Record
from harness.zoo.discovery import BUILTIN_ZOO
from harness.zoo.op_inventory import Inventory, OpEntry, SkippedOp

BUILTIN_INVENTORY = BUILTIN_ZOO / "ops" / "_inventory.json"
OPS_FAMILY = "ops"
OPINFO_FAMILY = "opinfo"

OK, WRONG, FAILS, UNKNOWN = "ok", "wrong", "fails", "unknown"
STATES = (OK, WRONG, FAILS, UNKNOWN)
STATE_TEXT = {
    OK: "exports and matches",
    WRONG: "exports, wrong numbers",
    FAILS: "fails",
    UNKNOWN: "not shown",
}
STATE_MARK = {OK: "ok", WRONG: "wrong", FAILS: "FAILS", UNKNOWN: "?"}
# Where evidence disagrees within one column, the worse state wins: one failing use of an
# op is worth showing even where another model exported it.
_PRECEDENCE = {FAILS: 0, WRONG: 1, OK: 2, UNKNOWN: 3}


# == the data ==================================================================================


@dataclass(frozen=True, order=True)
class Column:
    exporter: str
    opset: int
    device: str = "cpu"
    variant: str = "base"
    dtype: str = ""  # OpInfo cells: the dtype the OpInfo ran at

    @classmethod
    def of(cls, r: Record) -> Column:
        dtype = str((r.metadata or {}).get("dtype") or "") if r.family == OPINFO_FAMILY else ""
        return cls(r.exporter, r.opset, r.device, r.variant, dtype)

    @property
    def label(self) -> str:
        device = "" if self.device == "cpu" else f" {self.device}"
        variant = "" if self.variant == "base" else f" [{self.variant}]"
        dtype = " (all dtypes)" if self.dtype == "all" else f" {self.dtype}" if self.dtype else ""
        return f"{self.exporter}@{self.opset}{device}{variant}{dtype}"


@dataclass(frozen=True)
class OpState:
    """One op in one column: its state, the error signature behind it (or the reason it is
    unknown), the models of the cells that showed it, and one such cell."""

    state: str
    signature: str | None = None
    models: tuple[str, ...] = ()
    cell: Cell | None = None
    samples: tuple[int, int] | None = None  # OpInfo cells: (samples matched, samples run)


@dataclass(frozen=True)
class OpRow:
    op: str
    usage: tuple[str, ...] | None  # the zoo models that use the op; None where unknown
    states: Mapping[Column, OpState]
    kind: str = "aten"  # "aten" (an ATen overload) or "opinfo" (an OpInfo's full name)

    def state(self, column: Column) -> str | None:
        s = self.states.get(column)
        return s.state if s else None

    @property
    def key(self) -> str:
        """What identifies the row across runs: ATen names case-blind (op cells are named
        in lower case), OpInfo names exactly ('T' and 't' are two OpInfos)."""
        return self.op if self.kind == OPINFO_FAMILY else self.op.lower()


@dataclass(frozen=True)
class ColumnSummary:
    column: Column
    ops: int  # ops with a state in this column
    counts: Mapping[str, int]
    covered_share: float | None
    weighted_share: float | None  # the same, each op weighted by the zoo models using it
    samples_matched: int | None = None  # OpInfo cells: samples that matched, of those run
    samples_run: int | None = None


@dataclass(frozen=True)
class Coverage:
    source: str  # which evidence: "op cells", "model cells" or both
    columns: tuple[Column, ...]
    rows: tuple[OpRow, ...]
    not_isolated: tuple[SkippedOp, ...] = field(default=())  # from the inventory

    @property
    def is_empty(self) -> bool:
        return not self.rows

    @property
    def unit(self) -> str:
        """What the rows are, for headings: 'OpInfos', 'ATen ops', or both."""
        kinds = {r.kind for r in self.rows}
        return (
            " and ".join(u for k, u in (("aten", "ATen ops"), ("opinfo", "OpInfos")) if k in kinds)
            or "ops"
        )

    def summaries(self) -> list[ColumnSummary]:
        return [_summary(self.rows, [c], c) for c in self.columns]

    def totals(self) -> list[ColumnSummary]:
        """Per exporter and opset over every dtype (OpInfo columns only): each (op, dtype)
        counts once; its column's `dtype` is 'all'. Empty where no column has a dtype."""
        groups: dict[Column, list[Column]] = {}
        for c in self.columns:
            if c.dtype:
                groups.setdefault(replace(c, dtype="all"), []).append(c)
        return [_summary(self.rows, cols, total) for total, cols in sorted(groups.items())]


def _summary(rows: Sequence[OpRow], columns: Sequence[Column], label: Column) -> ColumnSummary:
    """Counts over every (op, column) with a state: one column, or a dtype-less group."""
    seen = [(r, r.states[c]) for r in rows for c in columns if c in r.states]
    counts = {k: sum(1 for _, s in seen if s.state == k) for k in STATES}
    weight = [len(r.usage) if r.usage is not None else 0 for r, _ in seen]
    total = sum(weight)
    covered = sum(w for w, (_, s) in zip(weight, seen, strict=True) if s.state == OK)
    sampled = [s.samples for _, s in seen if s.samples is not None]
    return ColumnSummary(
        column=label,
        ops=len(seen),
        counts=counts,
        covered_share=counts[OK] / len(seen) if seen else None,
        weighted_share=covered / total if total else None,
        samples_matched=sum(m for m, _ in sampled) if sampled else None,
        samples_run=sum(n for _, n in sampled) if sampled else None,
    )


# == building it from records ==================================================================


def op_usage(path: Path = BUILTIN_INVENTORY) -> dict[str, tuple[str, ...]]:
    """Op overload -> the zoo models using it, from the inventory harness/ops.py writes
    (keyed by the real name and by the op cells' lower-case model name); empty if absent."""
    inventory = _read_inventory(path)
    if inventory is None:
        return {}
    entries: list[tuple[OpEntry | SkippedOp, str | None]] = [
        *((e, e.get("name")) for e in inventory.get("ops", ())),
        *((e, None) for e in inventory.get("skipped", ())),  # named by their op only
    ]
    usage: dict[str, tuple[str, ...]] = {}
    for entry, name in entries:
        models = tuple(entry.get("models") or ())
        usage[entry["op"]] = models
        usage.setdefault(name or entry["op"].lower(), models)
    return usage


def usage_for(
    records: Iterable[Record], path: Path = BUILTIN_INVENTORY
) -> dict[str, tuple[str, ...]] | None:
    """The zoo usage to weigh a run's rows by: from the op inventory where the run has op
    or OpInfo cells (model cells name their own models)."""
    families = {r.family for r in records}
    return op_usage(path) if families & {OPS_FAMILY, OPINFO_FAMILY} else None


def not_isolated(path: Path = BUILTIN_INVENTORY) -> tuple[SkippedOp, ...]:
    """The inventory's ops that have no one-op model, each with its reason."""
    inventory = _read_inventory(path)
    return tuple(inventory.get("skipped", ())) if inventory is not None else ()


def _read_inventory(path: Path) -> Inventory | None:
    """The op inventory (harness.zoo.generated.ops), as written; None where absent."""
    if not path.is_file():
        return None
    data: Inventory = json.loads(path.read_text())
    return data


@dataclass
class _Evidence:
    """States gathered for one (op key, column), before the worst one is picked."""

    states: list[OpState] = field(default_factory=list)

    def add(self, state: OpState) -> None:
        self.states.append(state)

    def merged(self) -> OpState:
        worst = min(_PRECEDENCE[s.state] for s in self.states)
        chosen = [s for s in self.states if _PRECEDENCE[s.state] == worst]
        models = tuple(sorted({m for s in chosen for m in s.models}))
        first = chosen[0]
        return OpState(first.state, first.signature, models, first.cell)


def build_coverage(
    records: Iterable[Record], *, usage: Mapping[str, Sequence[str]] | None = None
) -> Coverage:
    """The coverage matrix of a run. `usage` (op -> zoo models, `op_usage()`) names the
    models behind each op; without it they are the run's own models that used the op."""
    cells = {r.cell.key: r for r in records}  # a repeated cell keeps its last record
    opinfo_cells = [r for r in cells.values() if r.family == OPINFO_FAMILY]
    op_cells = [r for r in cells.values() if r.family == OPS_FAMILY]
    model_cells = [r for r in cells.values() if r.family not in (OPS_FAMILY, OPINFO_FAMILY)]
    names = _OpNames(usage or {})
    names.learn(r.model for r in op_cells)
    for r in model_cells:
        names.learn([*(r.export.aten_ops or ()), *(r.export.unsupported_ops or ())])
    evidence: dict[tuple[str, Column], _Evidence] = {}
    seen_in: dict[str, set[str]] = {}
    for key, column, state in _model_evidence(model_cells, names):
        evidence.setdefault((key, column), _Evidence()).add(state)
        seen_in.setdefault(key, set()).update(state.models)
    overridden = {(names.key(r.model), Column.of(r)) for r in op_cells}
    evidence = {k: v for k, v in evidence.items() if k not in overridden}
    for r in op_cells:
        evidence.setdefault((names.key(r.model), Column.of(r)), _Evidence()).add(op_cell_state(r))
    by_op: dict[str, dict[Column, OpState]] = {}
    for (key, column), ev in evidence.items():
        by_op.setdefault(key, {})[column] = ev.merged()
    rows = tuple(
        OpRow(names.display(key), _usage_of(key, usage, seen_in), states)
        for key, states in sorted(by_op.items())
    ) + opinfo_rows(opinfo_cells, usage or {})
    columns = tuple(sorted({c for row in rows for c in row.states}))
    kinds = (
        ("op cells", op_cells),
        ("OpInfo cells", opinfo_cells),
        ("model cells", model_cells),
    )
    source = " and ".join(s for s, present in kinds if present)
    return Coverage(source or "no cells", columns, rows)


def opinfo_rows(records: Sequence[Record], usage: Mapping[str, Sequence[str]]) -> tuple[OpRow, ...]:
    """One row per OpInfo (torch's full name), a column per (exporter, opset, ..., dtype);
    weighted by the zoo models using the OpInfo's ATen op (any overload of it)."""
    by_packet: dict[str, set[str]] = {}
    for op, models in usage.items():
        parts = op.split(".")
        if len(parts) >= 2 and parts[0] == "aten":
            by_packet.setdefault(parts[1], set()).update(models)
    states: dict[str, dict[Column, OpState]] = {}
    aten: dict[str, str | None] = {}
    for r in records:
        meta = r.metadata or {}
        name = str(meta.get("opinfo") or r.model)
        full = f"{name}.{meta['variant']}" if meta.get("variant") else name
        aten[full] = meta.get("aten_name")
        states.setdefault(full, {})[Column.of(r)] = op_cell_state(r)
    return tuple(
        OpRow(full, _packet_usage(aten[full], by_packet, usage), cols, kind=OPINFO_FAMILY)
        for full, cols in sorted(states.items())
    )


def _packet_usage(
    aten: str | None, by_packet: Mapping[str, set[str]], usage: Mapping[str, Sequence[str]]
) -> tuple[str, ...] | None:
    if not usage:
        return None
    return tuple(sorted(by_packet.get(aten or "", ())))


def _usage_of(
    key: str, usage: Mapping[str, Sequence[str]] | None, seen_in: Mapping[str, set[str]]
) -> tuple[str, ...] | None:
    if usage:
        found = next((v for k, v in usage.items() if k.lower() == key), None)
        if found is not None:
            return tuple(found)
    return tuple(sorted(seen_in[key])) if key in seen_in else None


def op_cell_state(r: Record) -> OpState:
    """An op cell's status as a coverage state: the op alone, so the cell's outcome is the op's."""
    if r.status.exported or (r.stage == "latency" and r.numerics.checks):
        state = OK  # a latency failure comes after the numerics passed
    elif r.status.wrong_numbers:
        state = WRONG
    elif not r.status.judged:
        state = UNKNOWN
    else:
        state = FAILS
    signature = None if state == OK else (r.error_signature or r.reason or r.status)
    samples = None
    if r.samples is not None:
        s = r.samples
        samples = (s.matched or 0, (s.run or 0) - (s.skipped or 0))
    return OpState(state, signature, (r.model,), r.cell, samples)


def _model_evidence(
    records: Sequence[Record], names: _OpNames
) -> Iterable[tuple[str, Column, OpState]]:
    for r in records:
        column, unsupported = Column.of(r), set(r.export.unsupported_ops or ())
        for op in unsupported:
            for key in names.keys(op):
                yield key, column, OpState(FAILS, r.error_signature, (r.model,), r.cell)
        passed = r.status.exported
        for op in set(r.export.aten_ops or ()) - unsupported:
            state = (
                OpState(OK, None, (r.model,), r.cell)
                if passed
                else OpState(
                    UNKNOWN, f"only in cells that failed otherwise ({r.status})", (r.model,), r.cell
                )
            )
            for key in names.keys(op):
                yield key, column, state


class _OpNames:
    """Row keys: an overload's lower-cased name ('aten.add.tensor', which is also its op
    cell's model name); a TorchScript packet ('aten.add') maps to every overload of it the
    run has seen, or to a row of its own."""

    def __init__(self, usage: Mapping[str, Sequence[str]]) -> None:
        self._display: dict[str, str] = {}
        self._overloads: dict[str, set[str]] = {}
        # The inventory only spells names; rows come from the run's own ops.
        self.learn(usage, rows=False)

    def learn(self, names: Iterable[str], *, rows: bool = True) -> None:
        for name in names:
            name = name.replace("::", ".")
            key = name.lower()
            if key not in self._display or name != key:  # prefer the real spelling
                self._display[key] = name
            if rows and name.count(".") >= 2:
                self._overloads.setdefault(_packet(key), set()).add(key)

    def key(self, name: str) -> str:
        return name.replace("::", ".").lower()

    def keys(self, name: str) -> list[str]:
        key = self.key(name)
        if key.count(".") >= 2:
            return [key]
        return sorted(self._overloads.get(key, ())) or [key]

    def display(self, key: str) -> str:
        return self._display.get(key, key)


def _packet(name: str) -> str:
    return ".".join(name.split(".")[:2])


# == what changed between two runs =============================================================


@dataclass(frozen=True)
class CoverageChange:
    """One op in one column whose state differs between a baseline and a candidate run."""

    op: str
    column: Column
    before: OpState
    after: OpState
    usage: tuple[str, ...]

    @property
    def lost(self) -> bool:
        """It exported and matched, and now it demonstrably does not (the op itself fails
        or gives wrong numbers; an op only seen in cells that fail for another reason is
        not blamed here: the cell's status change is the finding)."""
        return self.before.state == OK and self.after.state in (FAILS, WRONG)

    @property
    def gained(self) -> bool:
        return self.before.state != OK and self.after.state == OK


def coverage_changes(
    base: Iterable[Record],
    cand: Iterable[Record],
    *,
    usage: Mapping[str, Sequence[str]] | None = None,
) -> list[CoverageChange]:
    """Ops lost or newly covered per column, for ops present in both runs' column."""
    before, after = build_coverage(base, usage=usage), build_coverage(cand, usage=usage)
    old = {(r.key, c): (r, s) for r in before.rows for c, s in r.states.items()}
    changes = []
    for row in after.rows:
        for column, now in sorted(row.states.items()):
            if (row.key, column) not in old:
                continue
            old_row, was = old[(row.key, column)]
            models = row.usage or old_row.usage or ()
            change = CoverageChange(row.op, column, was, now, tuple(models))
            if change.lost or change.gained:
                changes.append(change)
    return changes

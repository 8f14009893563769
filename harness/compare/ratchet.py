"""The expected-status ratchet: every cell of the candidate judged against the expectation
that `expected/status.csv` holds for it (harness.zoo.expect's grammar; no row: it must
pass). Worse than expected blocks, and so does the expected status reached another way: a
new way of failing never hides behind an old row. Better than expected is an improvement,
reported with the command that rewrites the file."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import date

from harness.compare.findings import BLOCKING, IMPROVEMENT, WARNING, Finding, failure_text, finding
from harness.store.axes import AXES
from harness.store.records import Record
from harness.store.runs import Run
from harness.zoo.expect import ANY, Expect, lookup, row_glob, varied_axes
from harness.zoo.expected_file import ExpectedFile

WORSE, DIFFERENTLY, BETTER = "worse", "differently", "better"
# The cell fields an exact row names: what `--update-expected` writes one row for (the
# model, the exporter and every pinned axis: not the shape or the variant, `*` in the row).
PinKey = tuple[str, ...]
_PINNED = tuple(a for a in AXES if a.pinned)


def outcome(r: Record, expect: Expect | None) -> str | None:
    """How a record ended against its expectation: WORSE (a worse status rank), DIFFERENTLY
    (the expected status, but at another stage or with an error `match` does not find),
    BETTER, or None: as expected. Without an expectation the cell must pass."""
    if expect is None:
        return None if r.status.passing else WORSE
    if expect.status is None:  # the legacy form: any failure
        if r.status.passing:
            return BETTER
        return None if expect.explains(r) else DIFFERENTLY
    if r.status.rank > expect.status.rank:
        return WORSE
    if r.status.rank < expect.status.rank:
        return BETTER
    if r.status is expect.status and not expect.explains(r):
        return DIFFERENTLY
    return None


def update_command(expected_path: str, candidate: Run) -> str:
    return f"harness compare --update-expected --expected {expected_path} {candidate.path or candidate.run_id}"


def ratchet_findings(
    records: Iterable[Record], expected: ExpectedFile, *, today: date, command: str
) -> list[Finding]:
    """Blocking where a cell ended worse than expected or failed differently; an improvement
    (with the command that updates the file) where it ended better."""
    return [f for r in records if (f := _ratchet_finding(r, expected, today, command))]


def _ratchet_finding(
    r: Record, expected: ExpectedFile, today: date, command: str
) -> Finding | None:
    expect = lookup(expected.rows, r.cell, today)
    judged = outcome(r, expect)
    if judged is None:
        return None
    want = expect.describe() if expect else "ok"
    status = str(expect.status) if expect and expect.status else want
    if expect is None:
        source = f"{expected.path}: no row, expected to pass"
    else:
        where = expect.source or expected.path
        source = where + (f" ({expect.reason})" if expect.reason else "")
    if judged == WORSE:
        kind, severity = "worse_than_expected", BLOCKING
        message = f"expected {want}, got {failure_text(r)}"
    elif judged == DIFFERENTLY:
        kind, severity = "failed_differently", BLOCKING
        message = f"fails differently from {source}: expected {want}, got {failure_text(r)}"
    else:
        kind, severity = "better_than_expected", IMPROVEMENT
        message = f"expected {want}, got {r.status}: update with `{command}`"
    return finding(kind, severity, r, message, status, r.status, evidence=source)


def defer_to_ratchet(findings: list[Finding], expected: ExpectedFile) -> list[Finding]:
    """With an expected-status file the ratchet decides what blocks for status: a baseline
    status regression becomes a warning (the ratchet flags it when it is worse than expected)."""
    note = f"blocking is decided by {expected.path}"
    tied = ("status_regressed",)
    return [
        replace(f, severity=WARNING, evidence=note)
        if f.kind in tied and f.severity == BLOCKING
        else f
        for f in findings
    ]


# -- rewriting the file from a run -------------------------------------------------------------


def updated_expected(
    expected: ExpectedFile | None, records: Sequence[Record], *, today: date
) -> list[Expect]:
    """The rows that make `records` exactly as expected. Rows written by hand (globs, or
    naming a shape or variant) are kept. Each model, exporter, opset and device of this run
    (at a dtype and ORT optimisation) gets an exact row (shape and variant `*`) where those
    do not already say how its cells end: the worst status over its shapes and variants,
    and the stage it ended at. Exact rows of cells outside this run are kept."""
    old = expected.rows if expected else ()
    by_hand = tuple(e for e in old if _pinned(e) is None)
    groups: dict[PinKey, list[Record]] = {}
    varied = varied_axes(records)
    for r in records:
        key = (r.model, r.exporter, *(row_glob(a, r.cell, varied) for a in _PINNED))
        groups.setdefault(key, []).append(r)
    kept = [e for e in old if (k := _pinned(e)) is not None and k not in groups]
    fresh = [row for k, rs in groups.items() if (row := _exact_row(k, rs, old, by_hand, today))]
    return [*by_hand, *sorted(kept + fresh, key=lambda e: e.globs)]


def _pinned(e: Expect) -> PinKey | None:
    """The cell fields an exact row names; None for a row written by hand (a glob, a shape)."""
    key = (e.model, e.exporter, *(e.axes[a.key_column] for a in _PINNED))
    loose = any(e.axes[a.key_column] != ANY for a in AXES if not a.pinned)
    globbed = [v for a, v in zip(_PINNED, key[2:], strict=True) if v != ANY or not a.any_by_default]
    if loose or any(c in v for v in (*key[:2], *globbed) for c in "*?["):
        return None
    return key


def _exact_row(
    k: PinKey,
    group: Sequence[Record],
    old: Sequence[Expect],
    by_hand: Sequence[Expect],
    today: date,
) -> Expect | None:
    """The exact row for one group of cells, or None where the hand-written rows already
    judge every cell of it the same. An old row's reason and expiry survive while the status
    stays; so does its `match` while it still finds the error."""
    worst = max(group, key=lambda r: r.status.rank)
    same = [r for r in group if r.status is worst.status]
    stages = {r.stage for r in same}
    previous = next((e for e in old if _pinned(e) == k and e.status is worst.status), None)
    model, exporter, *pinned = k
    row = Expect(
        exporter,
        None,
        worst.status,
        stage=worst.stage if len(stages) == 1 else None,
        reason=previous.reason if previous else (worst.error_signature or worst.reason or "")[:160],
        expires=previous.expires if previous else None,
        model=model,
        axes={a.key_column: v for a, v in zip(_PINNED, pinned, strict=True)},
    )
    if previous and previous.match:
        with_match = row.with_(match=previous.match)
        row = with_match if all(with_match.explains(r) for r in same) else row

    def judged(rows: Sequence[Expect]) -> list[str | None]:
        return [outcome(r, lookup(tuple(rows), r.cell, today)) for r in group]

    return None if judged(by_hand) == judged([*by_hand, row]) else row

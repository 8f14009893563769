"""The `transformers` suite's known export failures (`_expected.csv` beside this file), in the
grammar of expected/status.csv (harness.plan.expected_file): one row per model, exporter,
opset and shape that failed deterministically in a run of the suite, naming the status, the
stage and the error's type, with the error signature as the reason. The zoo entries carry
these rows as their `expect=`: a cell failing the same way is `xfail`, one that starts to
pass is `xpass`, one that fails another way stays a failure.

    python -m model_zoo.transformers._expected RUN_DIR        # rewrite _expected.csv

Timeouts, crashes and out-of-memory cells are not written: they depend on the machine.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from harness.plan import expected_file
from harness.plan.expect import ANY, Expect
from harness.store import rundir
from harness.store.records import Record
from harness.store.status import Status
from model_zoo.transformers._inventory import EXPECTED, FAMILY

DETERMINISTIC = (
    Status.EXPORT_FAILED,
    Status.CHECKER_FAILED,
    Status.ORT_LOAD_FAILED,
    Status.ORT_RUN_FAILED,
    Status.NUMERICS_MISMATCH,
    Status.DYNAMIC_MISMATCH,
)


def raw_status(record: Record) -> Status | None:
    """The status a cell ended in before its expectation judged it (xfail: its stage's
    failure status)."""
    if record.status is Status.XFAIL:
        return record.stage.failure_status if record.stage is not None else None
    return record.status


def expected_rows(records: Iterable[Record]) -> list[Expect]:
    rows = []
    for r in records:
        status = raw_status(r)
        if r.family != FAMILY or status not in DETERMINISTIC:
            continue
        rows.append(
            Expect(
                r.exporter,
                str(r.opset),
                status,
                r.stage,
                _error_type_match(r),
                (r.error_signature or r.reason or "")[:200],
                model=r.model,
                device=r.device,
                shape="dynamic" if r.dynamic else "static",
                variant=ANY,
            )
        )
    return sorted(rows, key=lambda e: e.globs)


def _error_type_match(r: Record) -> str | None:
    """'^DispatchError:': the error type the signature starts with (the root cause's), as
    a pattern; the signature comes first in the text an expectation searches."""
    signature = r.error_signature or ""
    kind = signature.split(":", 1)[0].strip()
    return f"^{re.escape(kind)}:" if kind and ":" in signature else None


HEADER = expected_file.HEADER.replace(
    "# Regenerate from a run with: harness compare --update-expected RUN_DIR",
    "# The transformers suite's known failures, read by model_zoo/transformers/architectures.py.\n"
    "# Regenerate from a run of the suite with: python -m model_zoo.transformers._expected RUN_DIR",
)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run_dir", type=Path, help="a run of the transformers suite")
    p.add_argument("--out", type=Path, default=EXPECTED)
    args = p.parse_args(argv)
    rows = expected_rows(rundir.iter_records(args.run_dir))
    expected_file.write(args.out, rows, header=HEADER)
    print(f"{len(rows)} expected failures written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

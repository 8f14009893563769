"""Bisect a cell over real releases, each in an environment of its own (benchmarks/releases.py,
made once and kept between tries): harness bisect's search (harness.bisect.search, one cell,
the untried version nearest the middle of the open interval, a version without an
environment skipped with its reason) with a try that is `harness run` of the cell in that
release's environment. A version is bad where the cell ends otherwise than with the first
version of the range (the bisected finding is the status the last one moved to), and the
answer names the first bad release and where the cell went wrong: the optimizer rule the
harness found for wrong numbers, or, for an export failure, the exporter pass whose
frame is deepest in the traceback (`artifacts/.../error.txt`).

    python benchmarks/bisect_releases.py --model int_mask_attention --exporter dynamo \\
        torch-2.11.0 torch-2.12.0 torch-2.12.1 torch-2.13.0 torch-2.14.0 torch-2.14.1 torch-2.15.0

prints one JSON line: the answer, every try with its seconds, and the totals."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.releases import Release, harness_in, overlay, versions
from harness.bisect.search import Judgement, Search, Verdict

ZOO = Path(__file__).resolve().parent / "zoo_releases"
# A frame of one of the exporters' passes: torch's FX passes, onnxscript's rewrite rules
PASS = re.compile(r'File "[^"]*/(?:passes|rewriter/rules/\w+)/(\w+)\.py", line \d+, in (\w+)')


@dataclass(frozen=True)
class Try:
    release: str
    status: str  # the cell's status, or "skipped"
    seconds: float
    reason: str = ""  # why skipped; the failing pass of an export failure


def failing_pass(run_dir: Path, record: dict[str, Any]) -> str:
    """Where the cell went wrong: for wrong numbers, the optimizer's pass and rule the
    harness found (`mismatch_stage`); for an export failure, the deepest exporter pass in
    its traceback (`module (function)`); else nothing."""
    step = (record.get("mismatch_stage") or {}).get("optimizer_step") or {}
    if step.get("rule"):
        return f"{step.get('pass')}: {step['rule']}"
    error = (record.get("artifacts") or {}).get("error")
    text = (run_dir / error).read_text(errors="replace") if error else ""
    found = PASS.findall(text + (record.get("error_message") or ""))
    return f"{found[-1][0]} ({found[-1][1]})" if found else ""


def run_cell(release: Release, model: str, exporter: str, out: Path) -> Try:
    if release.python is None:
        return Try(release.name, "skipped", 0.0, release.why_not)
    code, seconds, err = harness_in(
        release.python, "run", "--local", "--zoo", str(ZOO), "--models", model,
        "--exporters", exporter, "--opsets", "18", "--static-only", "--repro-bound", "0",
        "--no-report", "--out", str(out),
    )  # fmt: skip
    lines = (out / "records.jsonl").read_text().splitlines() if code in (0, 1) else []
    if not lines:
        return Try(release.name, "skipped", seconds, f"harness run exited {code}: {err[-300:]}")
    record = json.loads(lines[-1])
    return Try(release.name, record["status"], seconds, failing_pass(out, record))


def bisect(releases: list[str], model: str, exporter: str, root: Path) -> dict[str, Any]:
    start = time.perf_counter()
    envs = {name: overlay(name, root / "envs") for name in releases}
    tries = {}
    for name in (releases[0], releases[-1]):
        tries[name] = run_cell(envs[name], model, exporter, root / "runs" / name)
    good, bad = tries[releases[0]].status, tries[releases[-1]].status
    search = Search("release", tuple(releases))
    while good != bad and (name := search.next_version()) is not None:
        tries[name] = t = run_cell(envs[name], model, exporter, root / "runs" / name)
        judged = (
            Judgement.SKIP
            if t.status == "skipped"
            else (Judgement.GOOD if t.status == good else Judgement.BAD)
        )
        search = search.with_verdict(Verdict(name, judged, t.reason))
    outcome = search.outcome()
    first = tries.get(outcome.first_bad or "")
    return {
        "model": model,
        "exporter": exporter,
        "range": releases,
        "good": good,
        "bad": bad,
        "first_bad": outcome.first_bad if good != bad else None,
        "last_good": outcome.last_good,
        "candidates": list(outcome.candidates),
        # where the failing side went wrong: the first bad release's, or where the range
        # is a fix (the first release fails, the last passes), the first release's
        "failing_pass": first.reason
        if first and first.status == bad and bad != "ok"
        else tries[releases[0]].reason,
        "versions": {n: versions(r.python) for n, r in envs.items() if r.python is not None},
        "tries": [asdict(t) for t in tries.values()],
        "runs": sum(t.status != "skipped" for t in tries.values()),
        "skipped": [f"{t.release}: {t.reason}" for t in tries.values() if t.status == "skipped"],
        "minutes": (time.perf_counter() - start) / 60,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", default="dynamo")
    p.add_argument("--root", type=Path, default=Path("results/bisect-releases"))
    p.add_argument("releases", nargs="+", help="environment names, oldest first")
    args = p.parse_args(argv)
    print(json.dumps(bisect(args.releases, args.model, args.exporter, args.root)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

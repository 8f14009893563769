"""Compare tonight's nightly runs with the previous nightly's and with expected/status.csv.

    python scripts/nightly_compare.py --baseline previous/runs|none --candidate nightly/runs \
        --expected expected/status.csv --out nightly [--label cpu] [--history-db DB]

--candidate is a run directory or a folder of them (one per suite, as nightly_run.py
writes); --baseline mirrors it (the previous nightly's artifact), or is `none` on the first
night, when only the expected-status file can say what blocks. Each run is compared as
`harness compare BASELINE CANDIDATE --expected FILE --allow-different-hardware` would
(GitHub's hosted runners change CPU models between nights; then only statuses, opsets,
numerics and ops are compared with the previous night). Latency, export time and memory
block only against the history (--history-db, the earlier nights): once it holds
--min-history nights on the same machine, each series is judged by its own noise, as
`harness compare --history` does; until then their regressions are warnings.
That policy is harness.compare.policy's; this script pairs the run directories, reads
them and the history, and writes the files.

Writes OUT/compare/<run>/{compare.md,compare.json,junit.xml,benchmark.json},
OUT/summary.md (also appended to $GITHUB_STEP_SUMMARY) and, when something blocks,
OUT/issue.md: the body of the tracking issue, with the blocking findings table.

With --bisect (off by default), each run with blocking findings is bisected: `harness bisect`
over the packages (--bisect-packages) whose versions differ between the previous night's
manifest and tonight's, on the cells that block, into OUT/bisect/<run>/; its answer (the
package and first bad version per cell) is added to summary.md and issue.md, so the tracking
issue names it. A bisection that fails is reported there too; it never changes the exit code.

Exit codes as harness compare's: 0 nothing blocking, 1 blocking regression, 2 usage or
infrastructure error (a missing baseline or run directory, a run without records). An
error wins over a regression: the verdict is incomplete; issue.md is still written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.compare import CompareError, Comparison, check_comparable
from harness.compare.output import append_step_summary
from harness.compare.output import write_outputs as write_comparison
from harness.compare.output.markdown import findings_table, to_markdown
from harness.compare.policy import HISTORY_LAST, MIN_HISTORY, NightHistory, nightly_comparison
from harness.history.db import HistoryError, load_comparable
from harness.pipeline.remeasure import remeasure
from harness.store import graphs
from harness.store.markdown import md_code, md_text
from harness.store.paired import PairPlan, PairResult
from harness.store.records import CellKey
from harness.store.rundir import RunDirError
from harness.store.runs import Run, read_run
from harness.zoo import expected_file
from harness.zoo.expected_file import ExpectedFile, ExpectedFileError

NONE = "none"
# GitHub refuses a step summary over 1 MiB and an issue body over 65,536 characters.
SUMMARY_LIMIT = 900_000
ISSUE_LIMIT = 60_000
UPDATE_EXPECTED = "harness compare --update-expected RUN_DIR"


class NightlyError(Exception):
    """A run or baseline that cannot be compared (exit 2)."""


@dataclass(frozen=True)
class Pair:
    """One candidate run and the baseline run it is compared with (None: expected only)."""

    name: str
    candidate: Path
    baseline: Path | None
    note: str | None = None


@dataclass(frozen=True)
class Outcome:
    """One pair's comparison, or the error that prevented it."""

    pair: Pair
    comparison: Comparison | None = None
    error: str | None = None

    @property
    def blocking(self) -> int:
        return len(self.comparison.blocking) if self.comparison else 0


# -- pairing runs ---------------------------------------------------------------------------------


def is_run_dir(path: Path) -> bool:
    return (path / "manifest.json").is_file()


def find_pairs(candidate: Path, baseline: Path | None) -> list[Pair]:
    """Candidate runs (a run dir, or every subfolder of a folder) with their baselines."""
    if not candidate.is_dir():
        raise NightlyError(f"--candidate {candidate}: no such directory")
    if baseline is not None and not baseline.is_dir():
        raise NightlyError(
            f"--baseline {baseline}: no such directory (pass `none` on the first night)"
        )
    if is_run_dir(candidate):
        runs = [candidate]
    else:
        runs = sorted(p for p in candidate.iterdir() if p.is_dir())
        if not runs:
            raise NightlyError(f"--candidate {candidate}: no run directories in it")
    return [_pair(run, baseline, single=len(runs) == 1 and run == candidate) for run in runs]


def _pair(run: Path, baseline: Path | None, *, single: bool) -> Pair:
    if baseline is None:
        return Pair(run.name, run, None, "first night: no previous nightly to compare with")
    if single and is_run_dir(baseline):
        return Pair(run.name, run, baseline)
    mirrored = baseline / run.name
    if mirrored.is_dir():
        return Pair(run.name, run, mirrored)
    return Pair(run.name, run, None, f"the previous nightly has no run {run.name} (a new suite?)")


# -- comparing --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sources:
    """What judges a night besides the previous one (harness.compare.policy): the expected
    statuses, and the history database of earlier nights."""

    expected: ExpectedFile
    history_db: Path | None = None
    min_history: int = MIN_HISTORY
    # time each changed cell's two kept graphs together (harness compare's re-measurement)
    remeasure: bool = True


def compare_pair(pair: Pair, sources: Sources) -> Outcome:
    try:
        return Outcome(pair, comparison=_compare(pair, sources))
    except (NightlyError, RunDirError, CompareError) as exc:
        return Outcome(pair, error=str(exc))
    except OSError as exc:
        return Outcome(pair, error=f"{exc.filename or pair.candidate}: {exc.strerror}")


def _compare(pair: Pair, sources: Sources) -> Comparison:
    candidate = read_run(pair.candidate)
    if not candidate.records:
        raise NightlyError(f"{pair.candidate} has no records: the run wrote none")
    baseline = read_run(pair.baseline) if pair.baseline else None
    history = _history(candidate, sources.history_db)
    notes = [pair.note] if pair.note else []
    paired: dict[CellKey, PairResult] = {}
    comparable = (
        baseline is not None
        and baseline.records
        and not check_comparable(baseline, candidate, allow_different_hardware=True)
    )
    if sources.remeasure and comparable:
        paired, more = remeasure(baseline, candidate, plan=PairPlan())
        notes += more
    return nightly_comparison(
        candidate,
        baseline,
        sources.expected,
        history,
        min_history=sources.min_history,
        notes=notes,
        paired=paired,
    )


def _history(candidate: Run, db: Path | None) -> NightHistory:
    """The last comparable nights of the history database, or why there are none."""
    if db is None or not db.is_file():
        return NightHistory(unavailable="no history database yet")
    try:
        runs = load_comparable(db, candidate.manifest, last=HISTORY_LAST)
    except HistoryError as exc:
        return NightHistory(unavailable=f"the history database cannot be read ({exc})")
    return NightHistory(tuple(r.as_run() for r in runs))


def exit_code(outcomes: Sequence[Outcome]) -> int:
    if any(o.error for o in outcomes):
        return 2
    return 1 if any(o.blocking for o in outcomes) else 0


# -- markdown -----------------------------------------------------------------------------------


def run_url(env: Mapping[str, str]) -> str | None:
    """This workflow run's page, from the variables GitHub Actions sets."""
    parts = [env.get(k) for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID")]
    if not all(parts):
        return None
    server, repository, run_id = parts
    return f"{server}/{repository}/actions/runs/{run_id}"


def _headline(label: str, outcomes: Sequence[Outcome]) -> str:
    errors = sum(1 for o in outcomes if o.error)
    blocking = sum(o.blocking for o in outcomes)
    parts = []
    if errors:
        parts.append(f"{errors} run{'s' if errors != 1 else ''} not compared")
    if blocking:
        parts.append(f"{blocking} blocking finding{'s' if blocking != 1 else ''}")
    icon = "⚠️" if errors else "❌" if blocking else "✅"
    return f"# {icon} Nightly {md_code(label)}: " + (", ".join(parts) or "nothing blocking")


def _demoted(markdown: str) -> str:
    """harness compare's markdown one heading level down, to sit under a run's heading."""
    return "\n".join("#" + ln if ln.startswith("#") else ln for ln in markdown.splitlines())


def _source(pair: Pair) -> str:
    return f"{md_code(pair.candidate)} against " + (
        md_code(pair.baseline) if pair.baseline else "expected statuses only"
    )


def summary_markdown(
    label: str, outcomes: Sequence[Outcome], *, url: str | None, baseline_url: str | None
) -> str:
    lines = [_headline(label, outcomes), ""]
    if url:
        lines.append(f"Run: {url}")
    lines.append(f"Baseline: {baseline_url or 'none (first night, or no previous nightly kept)'}")
    for o in outcomes:
        lines += ["", f"## Run {md_code(o.pair.name)}: {_source(o.pair)}", ""]
        if o.error:  # it may quote a record: a run directory is untrusted input
            lines.append(f"**Error**: {md_text(o.error)}")
        elif o.comparison is not None:
            lines.append(_demoted(to_markdown(o.comparison)))
    text = "\n".join(lines) + "\n"
    return _capped(
        text, SUMMARY_LIMIT, "the full comparisons are compare/*/compare.md in the artifact"
    )


def issue_markdown(label: str, outcomes: Sequence[Outcome], *, url: str | None) -> str | None:
    """The tracking issue's body: the blocking findings of every run; None when none block."""
    blocking = [o for o in outcomes if o.blocking and o.comparison is not None]
    if not blocking:
        return None
    total = sum(o.blocking for o in blocking)
    lines = [
        f"### Nightly {md_code(label)}: {total} blocking finding{'s' if total != 1 else ''}",
        "",
    ]
    if url:
        lines += [f"Run, summary and artifacts: {url}", ""]
    for o in blocking:
        c = o.comparison
        assert c is not None
        versions = md_text(_versions(c.candidate))
        lines += [f"#### Run {md_code(o.pair.name)} ({versions}): {_source(o.pair)}", ""]
        lines += [*findings_table(c.blocking), ""]
    lines += [
        "Fix the regression (upstream or in the harness), or, where a status change is intended,",
        f"accept it: `{UPDATE_EXPECTED}` on the run directory (in the nightly artifact), then",
        "commit `expected/status.csv`. A latency or memory regression is reported once: the",
        "next night compares with this one.",
    ]
    return _capped("\n".join(lines) + "\n", ISSUE_LIMIT, "see the run summary for the rest")


def _versions(run: Run) -> str:
    v = run.versions()
    return (
        ", ".join(f"{k} {v[k]}" for k in ("torch", "onnxscript", "onnxruntime") if v.get(k))
        or run.run_id
    )


def _capped(text: str, limit: int, where: str) -> str:
    if len(text) <= limit:
        return text
    return text[:limit].rsplit("\n", 1)[0] + f"\n\n… truncated at {limit} characters: {where}.\n"


# -- bisecting the blocking findings (--bisect) ------------------------------------------------------

# What a nightly bisects when it moved: torch is left out (its builds come from their own
# indexes, several GB each), and so are ray and numpy (the harness's own machinery).
BISECT_PACKAGES = "onnxscript,onnx-ir,onnx,onnxruntime,transformers"


def moved_packages(
    baseline: Run, candidate: Run, packages: Sequence[str]
) -> list[tuple[str, str, str]]:
    """(package, last night's version, tonight's) for each package that moved."""
    before, after = baseline.versions(), candidate.versions()
    return [
        (p, str(before[p]), str(after[p]))
        for p in packages
        if before.get(p) and after.get(p) and before[p] != after[p]
    ]


def harness_command() -> list[str]:
    found = shutil.which("harness")
    return [found] if found else [sys.executable, "-m", "harness.cli"]


def bisect_command(
    comparison: Comparison, moves: Sequence[tuple[str, str, str]], out: Path
) -> list[str]:
    """`harness bisect` over the moved packages, on the cells that block tonight."""
    cells = [f.cell for f in comparison.blocking if f.cell is not None]
    command = [*harness_command(), "bisect"]
    for package, good, bad in moves:
        command += ["--package", package, "--good", good, "--bad", bad]
    manifest = comparison.candidate.manifest
    if manifest.suite:
        command += ["--suite", manifest.suite]
    command += [
        "--models", ",".join(sorted({c.model for c in cells})),
        "--exporters", ",".join(sorted({c.exporter for c in cells})),
        "--opsets", ",".join(str(o) for o in sorted({c.opset for c in cells})),
        "--devices", ",".join(sorted({c.device for c in cells})),
        "--dynamic" if any(c.dynamic for c in cells) else "--static-only",
        "--threads", str((manifest.settings and manifest.settings.threads) or 1),
        "--out", str(out),
    ]  # fmt: skip
    return command


def bisect_outcome(o: Outcome, packages: Sequence[str], out: Path) -> str | None:
    """Bisect one run's blocking findings; the markdown section that says what it found
    (None where nothing blocks)."""
    c = o.comparison
    if c is None or not any(f.cell is not None for f in c.blocking):
        return None
    heading = f"#### Bisection of run `{o.pair.name}`"
    if o.pair.baseline is None:
        return f"{heading}\n\nNot bisected: no previous night to take the good versions from.\n"
    try:
        moves = moved_packages(read_run(o.pair.baseline), c.candidate, packages)
    except (RunDirError, OSError) as exc:
        return f"{heading}\n\nNot bisected: the previous night cannot be read ({exc}).\n"
    if not moves:
        return f"{heading}\n\nNot bisected: none of {', '.join(packages)} moved since the previous night.\n"
    command = bisect_command(c, moves, out / o.pair.name)
    print(f"::group::{' '.join(command[command.index('bisect') :])}", flush=True)
    done = subprocess.run(
        command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    print(done.stderr, "::endgroup::", sep="\n", flush=True)
    answer = out / o.pair.name / "bisect.md"
    if done.returncode in (0, 1) and answer.is_file():
        return f"{heading}\n\n" + _demoted(answer.read_text()) + "\n"
    error = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
    return f"{heading}\n\n**Bisection failed**: {error}\n"


# -- the command ----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--baseline", required=True, help="the previous nightly's runs, or `none`")
    p.add_argument("--candidate", type=Path, required=True, help="tonight's run(s)")
    p.add_argument(
        "--expected", type=Path, default=Path("expected/status.csv"), help="expected-status CSV"
    )
    p.add_argument(
        "--out", type=Path, required=True, help="where compare/, summary.md, issue.md go"
    )
    p.add_argument("--label", default="cpu", help="what the summary and issue call this nightly")
    p.add_argument("--baseline-url", help="the previous nightly's run page, for the summary")
    p.add_argument(
        "--history-db", type=Path, help="the history of earlier nights (before tonight's are added)"
    )
    p.add_argument(
        "--min-history",
        type=int,
        default=MIN_HISTORY,
        metavar="N",
        help=f"nights on the same machine before latency and memory may block (default {MIN_HISTORY})",
    )
    p.add_argument(
        "--no-remeasure",
        action="store_true",
        help="do not time changed graphs again together with the previous night's",
    )
    p.add_argument(
        "--bisect",
        action="store_true",
        help="bisect each run's blocking findings over the packages that moved since the previous"
        " night (harness bisect), and add the answer to summary.md and issue.md",
    )
    p.add_argument(
        "--bisect-packages",
        default=BISECT_PACKAGES,
        metavar="LIST",
        help=f"the packages --bisect looks at, comma-separated (default {BISECT_PACKAGES})",
    )
    p.add_argument(
        "--graphs",
        type=Path,
        metavar="DIR",
        help="tonight's graph store (nightly_run.py --keep-graphs): after comparing, keep only"
        " the graphs tonight's runs reference (the next night's baseline)",
    )
    return p.parse_args(argv)


def prune_graphs(store: Path, outcomes: Sequence[Outcome]) -> str:
    """Keep the graphs tonight's runs reference; say how large the store is."""
    keep: set[str] = set()
    for o in outcomes:
        if o.comparison is not None:
            keep |= graphs.referenced(o.comparison.candidate.records)
    removed = graphs.prune(store, keep)
    entries, size = graphs.store_size(store)
    return f"graph store {store}: {entries} graphs, {size / 2**20:.1f} MiB ({removed} pruned)"


def write_outputs(out: Path, outcomes: Sequence[Outcome], summary: str, issue: str | None) -> None:
    for o in outcomes:
        if o.comparison is not None:
            write_comparison(o.comparison, out / "compare" / o.pair.name)
    (out / "summary.md").write_text(summary)
    issue_path = out / "issue.md"
    if issue is None:
        issue_path.unlink(missing_ok=True)
    else:
        issue_path.write_text(issue)


def run(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    baseline = None if args.baseline.strip().lower() == NONE else Path(args.baseline)
    try:
        if not args.expected.is_file():
            raise NightlyError(f"--expected {args.expected}: no such file")
        expected = expected_file.read(args.expected)
        pairs = find_pairs(args.candidate, baseline)
    except (NightlyError, ExpectedFileError) as exc:
        args.out.mkdir(parents=True, exist_ok=True)
        message = f"# ⚠️ Nightly {md_code(args.label)}: not compared\n\n**Error**: {md_text(exc)}\n"
        (args.out / "summary.md").write_text(message)
        append_step_summary(message, env)
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sources = Sources(expected, args.history_db, args.min_history, not args.no_remeasure)
    outcomes = [compare_pair(p, sources) for p in pairs]
    url = run_url(env)
    summary = summary_markdown(args.label, outcomes, url=url, baseline_url=args.baseline_url)
    issue = issue_markdown(args.label, outcomes, url=url)
    if args.bisect:
        packages = [p.strip() for p in args.bisect_packages.split(",") if p.strip()]
        found = [b for o in outcomes if (b := bisect_outcome(o, packages, args.out / "bisect"))]
        summary += "".join(f"\n{b}" for b in found)
        issue = issue and issue + "".join(f"\n{b}" for b in found)
    args.out.mkdir(parents=True, exist_ok=True)
    write_outputs(args.out, outcomes, summary, issue)
    append_step_summary(summary, env)
    print(summary)
    if args.graphs is not None and args.graphs.is_dir():
        print(prune_graphs(args.graphs, outcomes))
    for o in outcomes:
        if o.error:
            print(f"error: {o.pair.name}: {o.error}", file=sys.stderr)
    return exit_code(outcomes)


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv), os.environ)


if __name__ == "__main__":
    sys.exit(main())

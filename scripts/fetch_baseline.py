"""Download the previous nightly's artifact (its runs and history database) with `gh`.

    python scripts/fetch_baseline.py --artifact nightly-cpu --dest previous \
        [--workflow nightly.yml] [--branch main] [--exclude-run ID] [--history-out DB]

The baseline is the artifact of the most recent completed scheduled run of the workflow
on the default branch that still has it: successful or not, since a night that found a
regression still measured what it measured (comparing with the last green night instead
would report an accepted latency change every night). Manual runs never become a
baseline: they may run other suites, opsets or packages. No such run, or artifacts
expired (90 days): the first night; the comparison is then against expected/status.csv
only.

Prints and writes to $GITHUB_OUTPUT `baseline=DEST/runs` (or `none`) and `run_url=`.
With --history-out, copies the previous history database there (the history carries on),
unless a history is already there (the Actions cache restored it: the artifact's copy is
the fallback when the cache has none).
Needs `gh` with GH_TOKEN (actions: read) and GH_REPO. Exit 0 with or without a baseline;
2 when gh cannot list the runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

NONE = "none"


class GhError(Exception):
    """gh failed: the message carries its stderr."""


def gh(*args: str) -> str:
    done = subprocess.run(["gh", *args], capture_output=True, text=True, check=False)
    if done.returncode:
        raise GhError(f"gh {' '.join(args[:2])} failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout


def default_branch() -> str:
    return gh(
        "repo", "view", "--json", "defaultBranchRef", "--jq", ".defaultBranchRef.name"
    ).strip()


def previous_runs(workflow: str, branch: str, limit: int) -> list[dict[str, object]]:
    """Completed scheduled runs of the workflow on the branch, newest first."""
    out = gh(
        "run", "list", "--workflow", workflow, "--branch", branch, "--event", "schedule",
        "--status", "completed", "--limit", str(limit),
        "--json", "databaseId,conclusion,createdAt,url",
    )  # fmt: skip
    return list(json.loads(out or "[]"))


def download(run_id: str, artifact: str, dest: Path) -> bool:
    """Download the run's artifact into dest; False when the run has none (or it expired)."""
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        gh("run", "download", run_id, "--name", artifact, "--dir", str(partial))
    except GhError as exc:
        print(f"run {run_id}: no artifact {artifact} ({exc})", file=sys.stderr)
        shutil.rmtree(partial, ignore_errors=True)
        return False
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return True


def write_outputs(values: Mapping[str, str], env: Mapping[str, str]) -> None:
    for k, v in values.items():
        print(f"{k}={v}")
    target = env.get("GITHUB_OUTPUT")
    if target:
        with open(target, "a") as f:
            f.writelines(f"{k}={v}\n" for k, v in values.items())


def fetch(args: argparse.Namespace) -> dict[str, str]:
    branch = args.branch or default_branch()
    dest = args.dest.resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    for run in previous_runs(args.workflow, branch, args.limit):
        run_id = str(run.get("databaseId"))
        if run_id == args.exclude_run or run.get("conclusion") == "cancelled":
            continue
        if download(run_id, args.artifact, dest):
            print(
                f"baseline: {args.artifact} of run {run_id} ({run.get('conclusion')}, {run.get('createdAt')})"
            )
            runs = args.dest / "runs"
            if args.history_out and args.history_out.is_file():
                print(f"history: {args.history_out} kept (restored from the Actions cache)")
            elif args.history_out and (args.dest / "history.sqlite").is_file():
                args.history_out.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(args.dest / "history.sqlite", args.history_out)
                print(f"history: {args.dest / 'history.sqlite'} -> {args.history_out}")
            return {
                "baseline": str(runs if runs.is_dir() else args.dest),
                "run_url": str(run.get("url") or ""),
            }
    print(
        f"no previous scheduled run of {args.workflow} on {branch} has {args.artifact}: first night"
    )
    return {"baseline": NONE, "run_url": ""}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--artifact", required=True, help="artifact name, e.g. nightly-cpu")
    p.add_argument("--dest", type=Path, required=True, help="where the artifact is unpacked")
    p.add_argument("--workflow", default="nightly.yml", help="workflow file (default nightly.yml)")
    p.add_argument("--branch", help="branch of the runs (default: the repository's default branch)")
    p.add_argument("--exclude-run", default="", metavar="ID", help="this run's id ($GITHUB_RUN_ID)")
    p.add_argument("--limit", type=int, default=20, help="runs to look through (default 20)")
    p.add_argument(
        "--history-out", type=Path, metavar="DB", help="copy the previous history database here"
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        values = fetch(args)
    except (GhError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    write_outputs(values, os.environ)
    return 0


if __name__ == "__main__":
    sys.exit(main())

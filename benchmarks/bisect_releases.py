"""Bisections over real releases (issue 50) through `harness bisect --isolation env`: each
release in an environment of its own, kept between tries and bisections
(harness/bisect/environments.py), a torch release taken from a folder of environments made
beforehand (`--environments`, HARNESS_RELEASE_ENVS, default /work/envs: a CUDA torch wheel
from PyPI weighs several GB), an onnxscript release pip-installed from PyPI. This script
runs the command and turns its bisect.json into the figures benchmarks/README.md keeps: the
answer, the failing pass, each try with its seconds, the environments made or kept, the
installs, and the minutes.

    python benchmarks/bisect_releases.py torch 2.11.0 2.14.1 --model int_mask_attention \\
        --environments /work/envs
    python benchmarks/bisect_releases.py onnxscript 0.7.2 0.6.2 --fix --model addmm_beta_bn

prints one JSON line."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.releases import ENVS

REPO = Path(__file__).resolve().parent.parent
ZOO = REPO / "benchmarks" / "zoo_releases"


def bisect(
    package: str,
    good: str,
    bad: str,
    model: str,
    root: Path,
    *,
    fix: bool = False,
    environments: Path | None = None,
    exporter: str = "dynamo",
) -> dict[str, Any]:
    """`harness bisect` of one cell over `package`'s releases, into ROOT/bisect (its
    environments under ROOT/envs, kept for a later call): the figures."""
    out = root / "bisect"
    command = [
        sys.executable, "-m", "harness.cli", "bisect", "--package", package, "--good", good,
        "--bad", bad, "--zoo", str(ZOO), "--models", model, "--exporters", exporter,
        "--opsets", "18", "--static-only", "--isolation", "env", "--env-cache",
        str(root / "envs"), "--out", str(out), "--format", "json",
        *(["--fix"] if fix else []),
        *(["--environments", str(environments)] if environments else []),
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    minutes = (time.perf_counter() - start) / 60
    if not (out / "bisect.json").is_file():
        return {"error": done.stderr[-2000:], "exit": done.returncode, "minutes": minutes}
    return {**figures(json.loads((out / "bisect.json").read_text())), "exit": done.returncode,
            "minutes": minutes, "model": model, "exporter": exporter}  # fmt: skip


def figures(answer: dict[str, Any]) -> dict[str, Any]:
    """What benchmarks/README.md keeps of a bisect.json."""
    tried = answer["tried"]
    envs = [t["environment"] for t in tried if t.get("environment")]
    return {
        "package": answer["package"],
        "range": [answer["moves"][0]["good"], answer["moves"][0]["bad"]],
        "fix": answer.get("fix", False),
        "first_bad": answer["first_bad"],
        "last_good": answer["last_good"],
        "failing_pass": answer.get("failing_pass"),
        "finding": next((c["finding"]["message"] for c in answer["cells"].values()), None),
        "tries": [
            {
                "set": t["label"],
                "purpose": t["purpose"],
                "verdict": f"skipped: {t['skipped']}"
                if t["skipped"]
                else ",".join(sorted({v["judgement"] for v in t["verdicts"].values()})),
                "seconds": t["seconds"],
                "environment": t.get("environment"),
            }
            for t in tried
        ],
        "runs": sum(1 for t in tried if t["run"]),
        "skipped": [f"{t['label']}: {t['skipped']}" for t in tried if t["skipped"]],
        "environments_made": sum(1 for e in envs if not e["kept"]),
        "environments_kept": sum(1 for e in envs if e["kept"]),
        "installs": sorted({i for t in tried for i in t["installs"]}),
        "wall_s": answer["wall_s"],
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("package")
    p.add_argument("good")
    p.add_argument("bad")
    p.add_argument("--model", required=True)
    p.add_argument("--exporter", default="dynamo")
    p.add_argument("--fix", action="store_true", help="good is the newer, fixed release")
    p.add_argument("--environments", type=Path, help=f"releases' environments (e.g. {ENVS})")
    p.add_argument("--root", type=Path, default=Path("results/bisect-releases"))
    args = p.parse_args(argv)
    found = bisect(args.package, args.good, args.bad, args.model, args.root, fix=args.fix,
                   environments=args.environments, exporter=args.exporter)  # fmt: skip
    print(json.dumps(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())

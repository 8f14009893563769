"""The two channels on real releases (issue 50): the nightly's machinery (`harness run`,
`harness history add`, `harness publish STABLE --pre-release PRE`) with torch 2.13.0 as the
stable channel and 2.14.1 as the pre-release one, each in its own environment
(benchmarks/releases.py), over the smoke suite, vision at opset 18 and the two 2026 bugs'
models (benchmarks/zoo_releases/). The site must name each channel's versions and list the
cells whose graph differs as well as those whose status does, as the runs themselves say."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.conftest import Figures
from benchmarks.releases import harness_in, overlay, versions

CHANNELS = {"stable": "torch-2.13.0", "pre-release": "torch-2.14.1"}
ZOO = Path(__file__).resolve().parent / "zoo_releases"
RUNS = {
    "smoke": ("--suite", "smoke"),
    "vision": ("--suite", "vision", "--opsets", "18"),
    "releases": (
        "--zoo",
        str(ZOO),
        "--models",
        "family:releases",
        "--opsets",
        "18",
        "--static-only",
    ),
}


def _records(run_dir: Path) -> dict[str, dict[str, Any]]:
    lines = (run_dir / "records.jsonl").read_text().splitlines()
    return {
        f"{r['model']}/{r['exporter']}/{r['opset']}/{r['dynamic']}": r
        for r in map(json.loads, filter(str.strip, lines))
    }


def _rows(html: str, table: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table}">.*?<tbody>(.*?)</tbody>', html, re.S)
    assert body is not None, table
    rows = re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S)
    return [
        [re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r)]
        for r in rows
    ]


def test_two_channels_on_real_torch_releases(figures: Figures, tmp_path: Path) -> None:
    envs = {name: overlay(release, tmp_path / "envs") for name, release in CHANNELS.items()}
    missing = [f"{r.name}: {r.why_not}" for r in envs.values() if r.python is None]
    if missing:
        pytest.skip("; ".join(missing))
    seconds: dict[str, float] = {}
    found = {}
    for channel, release in envs.items():
        assert release.python is not None
        found[channel] = versions(release.python)
        dirs = []
        for name, selection in RUNS.items():
            out = tmp_path / channel / name
            code, took, err = harness_in(
                release.python, "run", "--local", *selection, "--repro-bound", "0",
                "--no-report", "--out", str(out),
            )  # fmt: skip
            assert code in (0, 1), err
            seconds[f"{channel} {name}"] = took
            dirs.append(out)
        code, _, err = harness_in(
            release.python, "history", "--db", str(tmp_path / f"{channel}.sqlite"), "add",
            *map(str, dirs),
        )  # fmt: skip
        assert code == 0, err
    site = tmp_path / "site"
    code, took, err = harness_in(
        envs["stable"].python,  # type: ignore[arg-type]
        "publish", str(tmp_path / "stable.sqlite"),
        "--pre-release", str(tmp_path / "pre-release.sqlite"), "--out", str(site),
    )  # fmt: skip
    assert code == 0, err
    # What the runs say, cell by cell: statuses and graph fingerprints.
    stable, pre = ({} for _ in range(2))
    for name in RUNS:
        stable |= _records(tmp_path / "stable" / name)
        pre |= _records(tmp_path / "pre-release" / name)
    statuses = sorted(k for k in stable if stable[k]["status"] != pre.get(k, {}).get("status"))
    graphs = sorted(
        k
        for k in stable
        if stable[k].get("graph_fingerprint")
        and pre.get(k, {}).get("graph_fingerprint")
        and stable[k]["graph_fingerprint"] != pre[k]["graph_fingerprint"]
    )
    html = (site / "channels.html").read_text()
    shown_versions = {r[0]: r[1:] for r in _rows(html, "versions")}
    # the manifest records the distribution's version: 2.14.1 for the CUDA wheel whose
    # torch.__version__ says 2.14.1+cu130
    local = [found[c]["torch"].split("+")[0] for c in CHANNELS]
    assert [v.split("+")[0] for v in shown_versions["torch"]] == local
    assert len(_rows(html, "differences")) == len(statuses)
    assert len(_rows(html, "graphs")) == len(graphs)
    overview = (site / "index.html").read_text()
    assert f"torch {found['stable']['torch']}" in overview
    lines = [
        f"- stable: torch {found['stable']['torch']}, pre-release: torch "
        f"{found['pre-release']['torch']} (onnxscript {found['stable']['onnxscript']}, onnxruntime "
        f"{found['stable']['onnxruntime']} in both); {len(stable)} cells each "
        f"(smoke, vision @18, the two bugs' models)",
        f"- {len(statuses)} cells differ in status ({', '.join(statuses) or 'none'}); "
        f"**{len(graphs)} exported another graph** ({', '.join(graphs) or 'none'})",
        "- runs: "
        + ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items())
        + f"; the site from both {took:.1f} s",
    ]
    figures.add("Channels on real releases (torch 2.13.0 vs 2.14.1)", lines)
    print("\n".join(lines))

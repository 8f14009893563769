"""A real bisection, offline: real wheels of two probe packages built here and served from
a folder (`--find-links`, no index), real Ray runtime_envs that pip-install each version,
real TorchScript exports, real onnxruntime timings. Two packages moved at once; one of
them made one cell fail to export (from STATUS_BAD on) and another cell slower (from
SLOW on, the bad end), and one of its versions does not import. The harness must blame
the right package and name both first bad versions.

One test on purpose: each version tried costs a runtime_env and a worker's start-up
(about 45 s each on this loaded 2-core machine). So the versions are as few as give every
case (tests/bisect/probe_packages.py): the searches try the broken version, a good one and
STATUS_BAD, three runs; a first bad version strictly inside a longer range, found after
several bad tries, is tests/bisect/test_session.py's (a stand-in runner, 8 versions)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bisect.probe_packages import (
    BROKEN,
    CORE,
    CORE_VERSIONS,
    EXTRA,
    SLOW,
    STATUS_BAD,
    build_probe_wheels,
    write_probe_zoo,
)
from tests.conftest import run_cli

WIDEN, CHAIN = "probe_widen torchscript@18 cpu", "probe_chain torchscript@18 cpu"


def _before(version: str) -> str:
    return CORE_VERSIONS[CORE_VERSIONS.index(version) - 1]


def test_bisect_names_the_package_and_the_first_bad_version_of_a_status_change_and_a_slowdown(
    tmp_path: Path,
) -> None:
    wheels, zoo, out = build_probe_wheels(tmp_path), write_probe_zoo(tmp_path), tmp_path / "b"
    result = run_cli(
        "bisect",
        "--package", CORE, "--good", CORE_VERSIONS[0], "--bad", CORE_VERSIONS[-1],
        "--package", EXTRA, "--good", "1.0", "--bad", "1.1",
        "--find-links", str(wheels), "--zoo", str(zoo), "--exporters", "torchscript",
        "--opsets", "18", "--out", str(out), "--format", "json",
        timeout=1800, ray=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    answer = json.loads((out / "bisect.json").read_text())
    assert json.loads(result.stdout) == answer

    assert answer["package"] == CORE
    assert (answer["first_bad"], answer["last_good"]) == (STATUS_BAD, _before(STATUS_BAD))
    widen, chain = answer["cells"][WIDEN], answer["cells"][CHAIN]
    assert (widen["package"], widen["first_bad"], widen["last_good"]) == (
        CORE,
        STATUS_BAD,
        _before(STATUS_BAD),
    )
    assert (chain["package"], chain["first_bad"], chain["last_good"]) == (CORE, SLOW, _before(SLOW))
    assert widen["finding"]["kind"] == "status_regressed"
    assert chain["finding"]["family"] == "ort_latency"

    # the evidence: the two records at each boundary, the graphs' op counts, the paired ratio
    evidence = widen["evidence"]
    assert evidence["last_good_record"]["status"] == "ok"
    assert evidence["first_bad_record"]["status"] == "export_failed"
    assert "aten::histc" in evidence["first_bad_record"]["error_message"]
    assert chain["evidence"]["op_count_diff"] == {"MatMul": [1, 64], "Tanh": [1, 64]}
    paired = chain["evidence"]["paired"]
    assert paired["verdict"] == "slower" and paired["low"] > 2.0
    for side in ("last_good_record", "first_bad_record"):
        assert (out / chain["evidence"][side]["run"] / "records.jsonl").is_file()

    # the culprit search ran each package alone on the good set; extra's move is harmless
    purposes = [t["purpose"] for t in answer["tried"]]
    assert purposes[:4] == ["good", "bad", "culprit", "culprit"]
    assert widen["blame"] == f"{CORE} alone at its bad version reproduces it"
    # the broken version was tried, could not be imported, and was skipped with the reason
    broken = [t for t in answer["tried"] if t["label"] == f"{CORE}-{BROKEN}"]
    assert broken and broken[0]["run"] is None
    assert f"ImportError: harness-probe-core {BROKEN} is broken on purpose" in broken[0]["skipped"]
    steps = [t["label"] for t in answer["tried"] if t["purpose"] == "bisect"]
    # 4 versions between, the middle one skipped: the next nearest, then STATUS_BAD
    assert steps == [f"{CORE}-{v}" for v in (BROKEN, _before(STATUS_BAD), STATUS_BAD)]

    # every set that ran is a variant of a run directory (the sets of one batch ran
    # together), and its workers saw the versions asked, installed from the folder
    for t in answer["tried"]:
        if t["run"]:
            manifest = json.loads((out / t["run"] / "manifest.json").read_text())
            seen = manifest["versions"][t["variant"]]
            for requirement in t["requirements"]:
                package, version = requirement.split("==")
                assert seen[package] == version
    assert answer["tried"][0]["run"] == answer["tried"][1]["run"]  # good and bad together
    markdown = (out / "bisect.md").read_text()
    assert markdown.startswith(
        f"## harness bisect ({CORE} 1.0 -> {CORE_VERSIONS[-1]}, {EXTRA} 1.0 -> 1.1): "
        f"first bad {CORE} {STATUS_BAD}"
    )
    assert "[1]" in result.stderr and "skipped: " in result.stderr  # progress on stderr

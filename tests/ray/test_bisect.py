"""A real bisection over Ray runtime_envs, offline: real wheels of two probe packages built
here and served from a folder (`--find-links`, no index), real runtime_envs that
pip-install each set, real TorchScript exports, real onnxruntime timings timed in pairs.
Two packages moved at once, from one version to the next; one of them made a cell slower
(harness-probe-core SLOW). The harness must blame the right package and name its version.

What only Ray does is kept here, at the fewest sets (four: good, bad and each package alone
on the good set, one runtime_env each, about a minute apiece on 2 cores): a search over a
longer range, skips of versions pip cannot install or that do not import, and a status
finding are tests/e2e/test_bisect_env.py's (the same session and verdicts, each version in a
kept venv, no Ray), and a first bad version strictly inside a longer range after several bad
tries tests/bisect/test_session.py's (a stand-in runner)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bisect.probe_packages import (
    CORE,
    EXTRA,
    SLOW,
    STATUS_BAD,
    build_probe_wheels,
    write_probe_zoo,
)
from tests.conftest import run_cli

WIDEN, CHAIN = "probe_widen torchscript@18 cpu", "probe_chain torchscript@18 cpu"


def test_bisect_over_runtime_envs_blames_the_package_that_made_a_cell_slower(
    tmp_path: Path,
) -> None:
    wheels, zoo, out = build_probe_wheels(tmp_path), write_probe_zoo(tmp_path), tmp_path / "b"
    result = run_cli(
        "bisect",
        "--package", CORE, "--good", STATUS_BAD, "--bad", SLOW,
        "--package", EXTRA, "--good", "1.0", "--bad", "1.1",
        "--find-links", str(wheels), "--zoo", str(zoo), "--exporters", "torchscript",
        "--opsets", "18", "--isolation", "ray", "--out", str(out), "--format", "json",
        timeout=1800, ray=True, env={"HARNESS_SKIP_WARM_UP": "0"},  # timings compared
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    answer = json.loads((out / "bisect.json").read_text())
    assert json.loads(result.stdout) == answer

    assert (answer["package"], answer["first_bad"], answer["last_good"]) == (CORE, SLOW, STATUS_BAD)
    assert WIDEN not in answer["cells"]  # export_failed at both ends: nothing moved
    chain = answer["cells"][CHAIN]
    assert (chain["package"], chain["first_bad"], chain["last_good"]) == (CORE, SLOW, STATUS_BAD)
    assert chain["finding"]["family"] == "ort_latency"
    assert chain["blame"] == f"{CORE} alone at its bad version reproduces it"

    # the evidence: the graphs' op counts, the paired ratio, both records' runs
    assert chain["evidence"]["op_count_diff"] == {"MatMul": [1, 64], "Tanh": [1, 64]}
    paired = chain["evidence"]["paired"]
    assert paired["verdict"] == "slower" and paired["low"] > 2.0
    for side in ("last_good_record", "first_bad_record"):
        assert (out / chain["evidence"][side]["run"] / "records.jsonl").is_file()

    # good and bad ran together, then each package alone on the good set; extra's move is
    # harmless; nothing lies between the versions, so no bisection step
    assert [t["purpose"] for t in answer["tried"]] == ["good", "bad", "culprit", "culprit"]
    assert answer["tried"][0]["run"] == answer["tried"][1]["run"]
    # every set ran as a variant of a run directory, its workers saw the versions asked
    for t in answer["tried"]:
        manifest = json.loads((out / t["run"] / "manifest.json").read_text())
        seen = manifest["versions"][t["variant"]]
        for requirement in t["requirements"]:
            package, version = requirement.split("==")
            assert seen[package] == version
    markdown = (out / "bisect.md").read_text()
    assert markdown.startswith(
        f"## harness bisect ({CORE} {STATUS_BAD} -> {SLOW}, {EXTRA} 1.0 -> 1.1): "
        f"first bad {CORE} {SLOW}"
    )
    assert "[1]" in result.stderr  # progress on stderr

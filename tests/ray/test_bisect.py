"""A real bisection over Ray runtime_envs, offline: real wheels of a probe package built
here and served from a folder (`--find-links`, no index), real runtime_envs that
pip-install each version, real TorchScript exports, real onnxruntime timings timed in
pairs. Over three versions of harness-probe-core, the middle one (STATUS_BAD) broke one
cell's export and the newest (SLOW) made another cell's graph slower: the harness must name
each cell's first bad version.

What only Ray does is kept here, at the fewest sets (three: good and bad together, then the
version between; one runtime_env each, for which Ray clones this virtualenv). The rest runs
without Ray over the same session: several packages moved at once and the one to blame, a
first bad version inside a longer range (tests/bisect/test_session.py's stand-in runner);
a search over a longer range, skips of versions pip cannot install or that do not import,
and a status finding (tests/e2e/test_bisect_env.py, each version in a kept venv)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.bisect.probe_packages import (
    BEFORE_STATUS_BAD,
    CORE,
    SLOW,
    STATUS_BAD,
    build_probe_wheels,
    write_probe_zoo,
)
from tests.conftest import run_cli

WIDEN, CHAIN = "probe_widen torchscript@18 cpu", "probe_chain torchscript@18 cpu"
GOOD = BEFORE_STATUS_BAD


def test_bisect_over_runtime_envs_names_each_cells_first_bad_version(
    tmp_path: Path,
) -> None:
    wheels, zoo, out = build_probe_wheels(tmp_path), write_probe_zoo(tmp_path), tmp_path / "b"
    result = run_cli(
        "bisect",
        "--package", CORE, "--good", GOOD, "--bad", SLOW,
        "--find-links", str(wheels), "--zoo", str(zoo), "--exporters", "torchscript",
        "--opsets", "18", "--isolation", "ray", "--out", str(out), "--format", "json",
        timeout=1800, ray=True, env={"HARNESS_SKIP_WARM_UP": "0"},  # timings compared
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-4000:]
    answer = json.loads((out / "bisect.json").read_text())
    assert json.loads(result.stdout) == answer

    # the first version that broke any cell: probe_widen's export fails from STATUS_BAD on,
    # probe_chain's graph is slower from SLOW on; one step at STATUS_BAD tells both
    assert (answer["package"], answer["first_bad"], answer["last_good"]) == (CORE, STATUS_BAD, GOOD)
    widen = answer["cells"][WIDEN]
    assert (widen["first_bad"], widen["last_good"]) == (STATUS_BAD, GOOD)
    assert widen["finding"]["kind"] == "status_regressed"
    assert "aten::histc" in widen["finding"]["message"]
    chain = answer["cells"][CHAIN]
    assert (chain["package"], chain["first_bad"], chain["last_good"]) == (CORE, SLOW, STATUS_BAD)
    assert chain["finding"]["family"] == "ort_latency"

    # the evidence: the graphs' op counts, the paired ratio, both records' runs
    assert chain["evidence"]["op_count_diff"] == {"MatMul": [1, 64], "Tanh": [1, 64]}
    paired = chain["evidence"]["paired"]
    assert paired["verdict"] == "slower" and paired["low"] > 2.0
    for side in ("last_good_record", "first_bad_record"):
        assert (out / chain["evidence"][side]["run"] / "records.jsonl").is_file()

    # good and bad ran together, then the one version between them
    assert [(t["purpose"], t["requirements"]) for t in answer["tried"]] == [
        ("good", [f"{CORE}=={GOOD}"]),
        ("bad", [f"{CORE}=={SLOW}"]),
        ("bisect", [f"{CORE}=={STATUS_BAD}"]),
    ]
    assert answer["tried"][0]["run"] == answer["tried"][1]["run"] != answer["tried"][2]["run"]
    # every set ran as a variant of a run directory, its workers saw the versions asked
    for t in answer["tried"]:
        manifest = json.loads((out / t["run"] / "manifest.json").read_text())
        seen = manifest["versions"][t["variant"]]
        for requirement in t["requirements"]:
            package, version = requirement.split("==")
            assert seen[package] == version
    markdown = (out / "bisect.md").read_text()
    assert markdown.startswith(
        f"## harness bisect ({CORE} {GOOD} -> {SLOW}): first bad {CORE} {STATUS_BAD}"
    )
    assert "[1]" in result.stderr  # progress on stderr

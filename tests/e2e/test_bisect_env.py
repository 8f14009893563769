"""A real bisection without Ray (`--isolation env`): each version of a real local wheel
(tests/bisect/probe_packages.py, served with `--find-links`) pip-installed into a venv of its
own under a cache folder, its cell run there by a `harness run --local` of that venv's
Python, the run directories read back and compared as the Ray runner's are
(tests/ray/test_bisect.py: the same session, search and verdicts over runtime_envs).

The versions are as few as give every case at three runs: 1.0 good, 1.4 bad (the
`probe_widen` cell's export fails from STATUS_BAD on), 1.2 installs but does not import,
1.1 needs a package no index has (pip cannot install it), 1.3 good: both are named and
skipped, and the search still ends on 1.3 .. 1.4. Of its two cells only `probe_widen`
moves, so each step runs that cell alone. A second bisection over the same cache
makes no environment; a folder of environments made beforehand (`--environments`) is
overlaid the same way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from harness.bisect.environments import Environments, env_name
from harness.bisect.index import PipSource
from harness.store.rundir import read_records
from tests.bisect.probe_packages import (
    BROKEN,
    CORE,
    STATUS_BAD,
    build_wheel,
    core_source,
    write_probe_zoo,
)
from tests.conftest import run_cli

UNINSTALLABLE = "1.1"
CELL = "probe_widen torchscript@18 cpu"


def _wheels(root: Path) -> Path:
    wheels = root / "wheels"
    wheels.mkdir()
    for version in ("1.0", BROKEN, "1.3", STATUS_BAD):
        build_wheel(CORE, version, core_source(version), wheels)
    missing = ("harness-probe-missing>=1",)  # in no index: pip cannot resolve the set
    build_wheel(CORE, UNINSTALLABLE, core_source(UNINSTALLABLE), wheels, requires=missing)
    return wheels


def _bisect(
    root: Path, out: str, good: str, bad: str, *more: str, models: str = "probe_widen"
) -> tuple[int, dict, str]:
    result = run_cli(
        "bisect", "--package", CORE, "--good", good, "--bad", bad,
        "--find-links", str(root / "wheels"), "--zoo", str(root / "zoo"),
        "--models", models, "--exporters", "torchscript", "--opsets", "18",
        "--isolation", "env", "--env-cache", str(root / "cache"), "--out", str(root / out),
        "--format", "json", *more, env={"HARNESS_SKIP_WARM_UP": "0"},  # timings compared
    )  # fmt: skip
    answer = json.loads((root / out / "bisect.json").read_text())
    return result.returncode, answer, result.stderr


def _models(run_dir: Path) -> set[str]:
    return {r.model for r in read_records(run_dir)}


def test_bisect_in_environments_of_their_own_skips_what_cannot_install_and_keeps_them(
    tmp_path: Path,
) -> None:
    _wheels(tmp_path), write_probe_zoo(tmp_path)
    code, answer, stderr = _bisect(
        tmp_path, "first", "1.0", STATUS_BAD, models="probe_widen,probe_chain"
    )
    assert code == 0, stderr[-4000:]
    assert (answer["first_bad"], answer["last_good"]) == (STATUS_BAD, "1.3")
    assert list(answer["cells"]) == [CELL]  # probe_chain is the same at both ends
    cell = answer["cells"][CELL]
    assert cell["finding"]["kind"] == "status_regressed"
    assert cell["evidence"]["first_bad_record"]["status"] == "export_failed"

    tried = {t["label"]: t for t in answer["tried"]}
    assert [t["label"] for t in answer["tried"]] == [
        f"{CORE}-{v}" for v in ("1.0", STATUS_BAD, BROKEN, UNINSTALLABLE, "1.3")
    ]
    uninstallable = tried[f"{CORE}-{UNINSTALLABLE}"]  # named, skipped, no environment kept
    assert uninstallable["run"] is None and uninstallable["environment"] is None
    assert "pip cannot install it" in uninstallable["skipped"]
    assert "harness-probe-missing" in uninstallable["skipped"]
    broken = tried[f"{CORE}-{BROKEN}"]  # installed, does not import: skipped, no cell run
    assert broken["run"] is None
    assert f"{CORE} {BROKEN} is broken on purpose" in broken["skipped"]
    for label in (f"{CORE}-1.0", f"{CORE}-{STATUS_BAD}", f"{CORE}-1.3"):
        env = tried[label]["environment"]
        assert env["kept"] is False and env["seconds"] > 0
        assert tried[label]["installs"] == [f"{CORE}=={label.rsplit('-', 1)[1]}"]
        # each set ran in its own environment: its manifest saw the version asked for
        manifest = json.loads(
            (tmp_path / "first" / tried[label]["run"] / "manifest.json").read_text()
        )
        assert manifest["versions"]["base"][CORE] == label.rsplit("-", 1)[1]
        assert manifest["options"]["local"] is True
    # good and bad ran every selected cell; a step only the cell being bisected
    ran = {label: _models(tmp_path / "first" / tried[label]["run"]) for label in tried
           if tried[label]["run"]}  # fmt: skip
    assert ran == {
        f"{CORE}-1.0": {"probe_widen", "probe_chain"},
        f"{CORE}-{STATUS_BAD}": {"probe_widen", "probe_chain"},
        f"{CORE}-1.3": {"probe_widen"},
    }
    made = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(made) == 4  # 1.0, BROKEN, 1.3, STATUS_BAD; nothing for what pip refused

    # A second bisection over the same cache makes no environment and installs nothing
    code, again, stderr = _bisect(tmp_path, "second", "1.0", "1.3")
    assert code == 1, stderr[-4000:]  # 1.0 and 1.3 agree: nothing to bisect
    assert "nothing" in (again["note"] or "")
    assert [t["environment"]["kept"] for t in again["tried"]] == [True, True]
    assert [t["environment"]["seconds"] for t in again["tried"]] == [0, 0]
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == made

    # Environments made beforehand, DIR/<package>-<version>: overlaid, and one that is not
    # there is named
    premade = tmp_path / "premade"
    premade.mkdir()
    kept_13 = tried[f"{CORE}-1.3"]["environment"]["path"]
    (premade / env_name((f"{CORE}==1.3",))).symlink_to(kept_13)
    envs = Environments(tmp_path / "overlays", PipSource(), premade)
    found = envs.get((f"{CORE}==1.3",))
    assert found.python is not None and found.use is not None and not found.use.kept
    seen = subprocess.run([found.python, "-c", "import harness_probe_core as p, harness; print(p.VERSION)"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert seen.stdout.strip() == "1.3"  # the environment's package, this one's harness
    missing = envs.get((f"{CORE}==1.0",))
    assert missing.python is None and f"no environment {premade / f'{CORE}-1.0'}" in str(
        missing.reason
    )
    assert envs.get((f"{CORE}==1.3",)).use.kept  # type: ignore[union-attr]

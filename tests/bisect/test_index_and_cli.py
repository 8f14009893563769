"""What pip says about a folder of wheels (the real pip, no network: `--no-index
--find-links`), and `harness bisect`'s bad input: exit 2 with one line, before any Ray
starts, nothing written."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.bisect.index import PipSource, dry_run, list_versions, pip_error
from harness.bisect.versions import VersionError
from harness.cli import main
from tests.bisect.probe_packages import build_wheel

PROBE = "harness-probe-index"


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """1.0, 1.1 and 1.10 of a probe package; 1.1 depends on a package the folder lacks."""
    folder = tmp_path_factory.mktemp("wheels")
    for version in ("1.0", "1.10"):
        build_wheel(PROBE, version, "VALUE = 1\n", folder)
    build_wheel(PROBE, "1.1", "VALUE = 1\n", folder, requires=("harness-probe-missing>=1",))
    return folder


def test_the_versions_of_a_folder_are_what_pip_finds_there(wheels: Path) -> None:
    assert sorted(list_versions(PROBE, PipSource(find_links=str(wheels)))) == ["1.0", "1.1", "1.10"]
    # pip normalises the name as the index does
    assert len(list_versions("Harness_Probe.Index", PipSource(find_links=str(wheels)))) == 3


def test_a_package_the_folder_does_not_have_is_a_usage_error(wheels: Path) -> None:
    with pytest.raises(
        VersionError, match=f"--package nope: the folder {wheels} offers no such package"
    ):
        list_versions("nope", PipSource(find_links=str(wheels)))


def test_a_dry_run_says_what_installs_and_why_a_version_cannot(wheels: Path) -> None:
    source = PipSource(find_links=str(wheels))
    fine = dry_run((f"{PROBE}==1.10",), source)
    assert fine.ok and fine.installs == (f"{PROBE}==1.10",)
    missing = dry_run((f"{PROBE}==1.1",), source)
    assert not missing.ok and missing.installs == ()
    assert missing.reason is not None and "harness-probe-missing" in missing.reason


def test_pip_error_takes_its_last_error_line() -> None:
    stderr = (
        "WARNING: x\nERROR: Could not find a version\nERROR: No matching distribution found for y\n"
    )
    assert pip_error(stderr) == "No matching distribution found for y"
    assert pip_error("") == "pip failed without a message"


def _fails(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    code = main(["bisect", *argv])
    err = capsys.readouterr().err
    assert code == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


PROBE_CELLS = (
    "--suite",
    "smoke",
    "--models",
    "mlp_sigmoid",
    "--exporters",
    "torchscript",
    "--opsets",
    "18",
)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ((), "--package NAME --good VERSION --bad VERSION are required"),
        (("--package", PROBE, "--good", "1.0"), "each --package needs one --good and one --bad"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.10", "--package", PROBE.upper(), "--good", "1", "--bad", "2"), "a package is named twice"),
        (("--package", "nope", "--good", "1.0", "--bad", "1.10"), "--package nope: the folder"),
        (("--package", PROBE, "--good", "1.10", "--bad", "1.0"), "--good 1.10 must be older than --bad 1.0"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.2"), "does not offer harness-probe-index 1.2 (nearest: 1.1 and 1.10)"),
        (("--package", PROBE, "--good", "1.1", "--bad", "1.10"), "offers no harness-probe-index version between 1.1 and 1.10: 1.10 is the first bad one"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.10", "--finding", "speed"), "--finding speed: unknown (speed)"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.10", "--isolation", "ray", "--env-cache", "c"), "--env-cache needs --isolation env"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.10", "--environments", "/no/such/envs"), "--environments /no/such/envs: no such directory"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.10", "--isolation", "env", "--address", "auto"), "--address joins a Ray cluster: it needs --isolation ray"),
        (("--package", PROBE, "--good", "1.0", "--bad", "1.10", "--fix"), "--fix: --good 1.0 (the fixed version) must be newer"),
    ],
)  # fmt: skip
def test_bad_input_exits_2_with_one_line_and_writes_nothing(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    wheels: Path,
    argv: tuple[str, ...],
    message: str,
) -> None:
    out = tmp_path / "bisect"
    line = _fails(capsys, *argv, *PROBE_CELLS, "--find-links", str(wheels), "--out", str(out))
    assert message in line
    assert not out.exists()


def test_an_unknown_model_is_refused_before_pip_is_asked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    line = _fails(capsys, "--package", "onnxscript", "--good", "0.6.0", "--bad", "0.7.2",
                  "--models", "no_such_model", "--find-links", str(tmp_path))  # fmt: skip
    assert "no model in the zoo matches 'no_such_model'" in line


def test_a_missing_folder_and_a_taken_out_are_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    move = ("--package", "onnxscript", "--good", "0.6.0", "--bad", "0.7.2", *PROBE_CELLS)
    assert "--find-links /no/such/dir: no such directory" in _fails(
        capsys, *move, "--find-links", "/no/such/dir"
    )
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "bisect.json").write_text("{}")
    assert "is not an empty directory" in _fails(capsys, *move, "--out", str(taken))

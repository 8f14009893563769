"""A run directory handed over by someone else (CI downloads last night's): `harness report`
and `harness compare` never write through a symlink or outside the directory, and render
every value a record holds as text, never as markup or a link that leaves the report."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.store import files
from tests.conftest import one_line_error
from tests.fixtures_compare import manifest, smoke_cells, write_run


@pytest.fixture(autouse=True)
def _cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run in tmp_path so that the repository's expected/status.csv does not apply."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run", manifest("run"), smoke_cells(1))


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the run directory that a link in it points at."""
    path = tmp_path / "elsewhere" / "precious.txt"
    path.parent.mkdir()
    path.write_text("keep me\n")
    return path


# -- never through a symlink ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("link", "plots"),
    [("report.html", False), ("report.md", False), ("plots/matrix.png", True)],
)
def test_report_refuses_an_output_that_is_a_symlink(
    capsys: pytest.CaptureFixture[str], run: Path, victim: Path, link: str, plots: bool
) -> None:
    """`harness report` used to overwrite the file the link points at."""
    (run / link).parent.mkdir(exist_ok=True)
    (run / link).symlink_to(victim)
    message = one_line_error(capsys, "report", str(run), *([] if plots else ["--no-plots"]))
    assert f"{run / link} leads through the symlink {run / link} (to {victim})" in message
    assert victim.read_text() == "keep me\n"
    assert (run / link).is_symlink()


def test_report_refuses_a_plots_folder_that_leads_out(
    capsys: pytest.CaptureFixture[str], run: Path, victim: Path
) -> None:
    (run / "plots").symlink_to(victim.parent, target_is_directory=True)
    message = one_line_error(capsys, "report", str(run))
    assert f"leads through the symlink {run / 'plots'}" in message
    assert sorted(p.name for p in victim.parent.iterdir()) == ["precious.txt"]


def test_compare_refuses_an_output_that_is_a_symlink(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, run: Path, victim: Path
) -> None:
    other = write_run(tmp_path / "other", manifest("other"), smoke_cells(2))
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.json").symlink_to(victim)
    message = one_line_error(capsys, "compare", str(run), str(other), "--out", str(out))
    assert f"{out / 'compare.json'} leads through the symlink" in message
    assert victim.read_text() == "keep me\n"


def test_a_report_replaces_its_files_in_place(
    capsys: pytest.CaptureFixture[str], run: Path
) -> None:
    from harness.cli import main

    (run / "report.md").write_text("an older report\n")
    hard = run / "hard-link.md"
    os.link(run / "report.md", hard)  # a hard link shares the file: replacing leaves it be
    assert main(["report", str(run), "--no-plots"]) == 0
    assert (run / "report.md").read_text().startswith("4 cells: 4 ok")
    assert hard.read_text() == "an older report\n"
    assert not [p for p in run.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("target", ["../outside.md", "/etc/x", "a/../../b"])
def test_a_path_leading_out_of_the_directory_is_refused(tmp_path: Path, target: str) -> None:
    with pytest.raises(files.UnsafePath, match="is outside"):
        files.write_inside(tmp_path / "root", target, "x")
    assert not (tmp_path / "outside.md").exists()

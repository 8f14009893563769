"""The stages a cell notes as it enters them (harness/cell/stages.py `clocked(notes=...)`),
which the record of a cell killed mid-stage is made from (`entered`): the outermost stages
only, in order, each with its seconds up to the next one's start, the last up to now."""

from __future__ import annotations

import time
from pathlib import Path

from harness.cell.stages import clocked, entered, stage, timed


def test_the_notes_name_the_outermost_stages_and_a_line_cut_short_is_left_out(
    tmp_path: Path,
) -> None:
    notes = tmp_path / "cell.stages"
    with clocked(notes) as clock:
        with stage("build"):
            time.sleep(0.05)
        with timed("export"), timed("translate"):  # inside the export: its time
            pass
    assert [line.split(" ", 1)[1] for line in notes.read_text().splitlines()] == ["build", "export"]
    assert list(clock) == ["build", "export"]
    notes.write_text(notes.read_text() + "1796")  # the kill cut the next line short (ms stamps)
    spent = entered(notes)
    assert list(spent) == ["build", "export"]
    assert spent["build"] >= 0.04
    assert entered(tmp_path / "never-written") == {}

"""Tests of the repro minimizer, and the check both its module tests
(tests/repro/test_minimize.py) and the run's (tests/e2e/test_repro_cli.py) ask of a shrunk
deep failure."""

from __future__ import annotations

from pathlib import Path

from harness.store.details import MinimalRepro


def assert_shrunk_to_a_few_nodes_failing_alike(
    repro: MinimalRepro, kind: str, at_least: int, script: Path, inputs: Path
) -> None:
    """A failure of `kind` deep in a graph of `at_least` nodes or more, shrunk to 1-3 nodes
    whose script fails the same way in a fresh process (exit 1), the search run to its end,
    the script and its inputs written."""
    assert repro.kind == kind
    assert repro.nodes_before is not None and repro.nodes_before >= at_least
    assert repro.nodes_after is not None and 1 <= repro.nodes_after <= 3
    assert repro.reproduces is True, repro
    assert repro.verify is not None and repro.verify["exit_code"] == 1
    assert repro.search_complete
    assert script.name == "repro_min.py"
    assert inputs.is_file()

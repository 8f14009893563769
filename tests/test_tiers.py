"""The two tiers (tests/conftest.py): what the fast tier leaves out, and that the README's
test command is still the whole suite."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import E2E, RAY, REPO, SHARED_FIXTURE


def test_the_slow_tiers_are_marked_and_grouped(request: pytest.FixtureRequest) -> None:
    """Every collected test under tests/e2e/ is `e2e` and `slow`; every one under tests/ray/
    is `ray` and `slow`, in the `ray` xdist group; in the fast tier none is collected at
    all (an unmarked one would be, and fail here)."""
    items = request.session.items
    assert request.node in items
    for item in items:
        if E2E in item.path.parents:
            assert item.get_closest_marker("e2e") is not None, item.nodeid
            assert item.get_closest_marker("slow") is not None, item.nodeid
        if RAY in item.path.parents:
            assert item.get_closest_marker("ray") is not None, item.nodeid
            assert item.get_closest_marker("slow") is not None, item.nodeid
            group = item.get_closest_marker("xdist_group")
            assert group is not None and group.args == ("ray",), item.nodeid
        if item.get_closest_marker("ray") is not None:
            assert RAY in item.path.parents, f"{item.nodeid} starts Ray outside tests/ray/"


def test_each_module_xdist_keeps_together_shares_a_module_fixture() -> None:
    """A module renamed or moved would silently be split across the workers again."""
    for module in SHARED_FIXTURE:
        path = REPO / module
        assert path.is_file(), module
        assert 'scope="module"' in path.read_text(), module


def test_the_readme_test_command_is_the_whole_suite() -> None:
    readme = (REPO / "README.md").read_text()
    (line,) = [ln for ln in readme.splitlines() if "pip install" in ln and "python -m pytest" in ln]
    words = shlex.split(line.split("python -m pytest", 1)[1])
    assert not {"-m", "-k"} & set(words)  # nothing deselected
    assert not [w for w in words if re.match(r"tests\b", w)]  # no folder or file picked

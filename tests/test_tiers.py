"""The two tiers (tests/conftest.py): what the fast tier leaves out, and that the README's
test command is still the whole suite."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.conftest import E2E, RAY_ENVIRONMENTS, REPO, SHARED_FIXTURE, e2e_group


def test_the_e2e_tests_are_marked_and_grouped(request: pytest.FixtureRequest) -> None:
    """Every collected test under tests/e2e/ is `e2e` and `slow`, in its xdist group;
    in the fast tier none is collected at all (an unmarked one would be, and fail here)."""
    items = request.session.items
    assert request.node in items
    for item in items:
        if E2E not in item.path.parents and item.get_closest_marker("e2e") is None:
            continue
        assert item.get_closest_marker("e2e") is not None, item.nodeid
        assert item.get_closest_marker("slow") is not None, item.nodeid
        group = item.get_closest_marker("xdist_group")
        assert group is not None and group.args == (e2e_group(item.path),), item.nodeid
        if E2E in item.path.parents and item.path.name in RAY_ENVIRONMENTS:
            assert group.args == ("e2e-ray",), item.nodeid


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

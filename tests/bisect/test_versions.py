"""Which versions a bisection walks: PEP 440 order, pre-releases only when asked, and every
problem with --good/--bad as one clear message."""

from __future__ import annotations

import json

import pytest

from harness.bisect.versions import (
    Move,
    VersionError,
    canonical_name,
    offered_versions,
    offered_versions_text,
    walk,
)

ONNXSCRIPT = [
    "0.7.3.dev20261007", "0.7.2", "0.7.2.dev20260909", "0.7.1", "0.7.0", "0.7.0.dev20260418",
    "0.6.3.dev20260417", "0.6.2", "0.6.1", "0.6.0", "0.5.7", "0.10.0", "0.9.0",
]  # fmt: skip


def test_versions_are_ordered_as_pep_440_not_as_text() -> None:
    assert walk(ONNXSCRIPT, Move("onnxscript", "0.7.0", "0.10.0")) == (
        "0.7.0", "0.7.1", "0.7.2", "0.9.0", "0.10.0",
    )  # fmt: skip


def test_pre_releases_count_only_when_asked_or_named() -> None:
    plain = walk(ONNXSCRIPT, Move("onnxscript", "0.6.2", "0.7.2"))
    assert plain == ("0.6.2", "0.7.0", "0.7.1", "0.7.2")
    pre = walk(ONNXSCRIPT, Move("onnxscript", "0.6.2", "0.7.2"), pre=True)
    assert pre == (
        "0.6.2", "0.6.3.dev20260417", "0.7.0.dev20260418", "0.7.0", "0.7.1",
        "0.7.2.dev20260909", "0.7.2",
    )  # fmt: skip
    # a dev build as --bad asks for dev builds, as pip takes a pre-release only when named
    named = walk(ONNXSCRIPT, Move("onnxscript", "0.7.0", "0.7.2.dev20260909"))
    assert named == ("0.7.0", "0.7.1", "0.7.2.dev20260909")


def test_versions_keep_the_spelling_the_index_offers() -> None:
    assert walk(["1.0", "1.1.0", "2"], Move("p", "1.0.0", "2.0")) == ("1.0", "1.1.0", "2")


def test_unparseable_offered_versions_are_left_out_as_pip_does() -> None:
    assert walk(["1.0", "banana", "1.5", "2.0"], Move("p", "1.0", "2.0")) == ("1.0", "1.5", "2.0")


@pytest.mark.parametrize(
    ("move", "message"),
    [
        (Move("onnxscript", "0.7.2", "0.6.0"), "--good 0.7.2 must be older than --bad 0.6.0"),
        (Move("onnxscript", "0.7.2", "0.7.2"), "must be older than"),
        (Move("onnxscript", "0.6.5", "0.7.2"), "--good 0.6.5: PyPI does not offer onnxscript 0.6.5 (nearest: 0.6.3.dev20260417 and 0.7.0.dev20260418)"),
        (Move("onnxscript", "0.6.0", "1.0"), "--bad 1.0: PyPI does not offer onnxscript 1.0 (nearest: 0.10.0)"),
        (Move("onnxscript", "latest", "0.7.2"), "--good 'latest' is not a version"),
    ],
)  # fmt: skip
def test_bad_good_and_bad_versions_say_what_is_wrong(move: Move, message: str) -> None:
    with pytest.raises(VersionError) as caught:
        walk(ONNXSCRIPT, move, source="PyPI")
    assert message in str(caught.value)


def test_a_fix_walks_down_from_the_fixed_version() -> None:
    """--fix: good is the newer end; the search's first bad version is the last before the
    fix, its last good one the fix."""
    fixed = walk(
        ["0.6.2", "0.7.0", "0.7.1", "0.7.2"], Move("onnxscript", "0.7.2", "0.6.2"), fix=True
    )
    assert fixed == ("0.7.2", "0.7.1", "0.7.0", "0.6.2")
    with pytest.raises(
        VersionError, match=r"--fix: --good 0.6.2 .* must be newer than --bad 0.7.2"
    ):
        walk(["0.6.2", "0.7.2"], Move("onnxscript", "0.6.2", "0.7.2"), fix=True)


def test_builds_of_one_release_are_one_version() -> None:
    """An index with torch's own builds offers 2.13.0 and 2.13.0+cpu: one release to try."""
    offered = ["2.14.1", "2.13.0+cpu", "2.13.0", "2.12.1", "2.11.0", "2.11.0+cpu"]
    assert walk(offered, Move("torch", "2.11.0", "2.14.1")) == (
        "2.11.0",
        "2.12.1",
        "2.13.0",
        "2.14.1",
    )
    assert (
        walk(["2.12.0", "2.13.0+cpu", "2.14.0"], Move("torch", "2.12.0", "2.14.0"))[1]
        == "2.13.0+cpu"
    )


def test_no_version_offered_at_all() -> None:
    with pytest.raises(VersionError, match="the folder w offers no version of p"):
        walk([], Move("p", "1.0", "2.0"), source="the folder w")


def test_pip_index_json_is_read_and_garbage_is_an_error() -> None:
    listing = {"name": "onnxscript", "versions": ["0.7.2", "0.7.1"], "latest": "0.7.2"}
    assert offered_versions(json.dumps(listing)) == ["0.7.2", "0.7.1"]
    with pytest.raises(VersionError, match="cannot read pip's list"):
        offered_versions("Available versions: 0.7.2")
    with pytest.raises(VersionError, match="cannot read pip's list"):
        offered_versions('{"name": "onnxscript"}')


def test_package_names_compare_as_pep_503_normalises_them() -> None:
    assert canonical_name("Onnx_IR") == canonical_name("onnx-ir") == canonical_name("onnx.ir")
    assert Move("onnxscript", "0.6.0", "0.7.2").spec("0.6.1") == "onnxscript==0.6.1"


def test_an_older_pips_text_listing_is_read_too() -> None:
    text = "onnxscript (0.7.2)\nAvailable versions: 0.7.2, 0.7.1, 0.7.0\n  INSTALLED: 0.7.2\n"
    assert offered_versions_text(text) == ["0.7.2", "0.7.1", "0.7.0"]
    with pytest.raises(VersionError, match="no 'Available versions:' line"):
        offered_versions_text("ERROR: No matching distribution found for nope")

"""The check that lets tests needing a package index skip with the reason where there is
none (tests/conftest.py, `package_index_problem`): quick, bounded, and it says what it
tried. No network is needed: the unreachable index is a refused local port."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.conftest import package_index_problem

OFFLINE = {
    "PIP_CONFIG_FILE": os.devnull,  # no pip.conf: only what is set here counts
    "PIP_INDEX_URL": "http://127.0.0.1:9/simple",  # the discard port: refused at once
    "PIP_EXTRA_INDEX_URL": "",
}


def test_no_reachable_index_is_a_reason_given_quickly(tmp_path: Path) -> None:
    started = time.monotonic()
    problem = package_index_problem(
        "onnxscript==0.6.2", {**OFFLINE, "PIP_FIND_LINKS": str(tmp_path)}
    )
    assert problem is not None and "onnxscript==0.6.2" in problem
    assert "http://127.0.0.1:9/simple" in problem and str(tmp_path) in problem
    assert time.monotonic() - started < 30


def test_a_find_links_folder_with_the_file_is_enough(tmp_path: Path) -> None:
    (tmp_path / "onnxscript-0.6.2-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"")
    links = {**OFFLINE, "PIP_FIND_LINKS": str(tmp_path)}
    assert package_index_problem("onnxscript==0.6.2", links) is None
    assert package_index_problem("torch==2.13.0", links) is None  # a local version label
    assert package_index_problem("onnxscript==0.6.1", links) is not None


def test_a_file_index_is_read_like_a_served_one(tmp_path: Path) -> None:
    page = tmp_path / "simple" / "onnxscript" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text('<a href="../../onnxscript-0.6.2-py3-none-any.whl">onnxscript-0.6.2</a>')
    index = {**OFFLINE, "PIP_INDEX_URL": f"file://{tmp_path / 'simple'}", "PIP_FIND_LINKS": ""}
    assert package_index_problem("onnxscript==0.6.2", index) is None

"""Fixtures of the end-to-end tier: real `harness` commands over real run directories, in
the test's process and without Ray (`run_cli`: `harness run --local`, the same driver loop,
zygotes and cells as a Ray run). Every test under tests/e2e/ is marked `e2e` and `slow`
(tests/conftest.py), so the fast tier (`make test`) leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import FIXTURES, run_cli


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One small real run per session (the tiny suite: 3 models, both exporters, 3 opsets,
    the dynamic cells), for tests that only read its outputs: never write into it. Its
    readers are in one module (test_publish.py): each module here is an xdist scope of its
    own, so a reader in another module would have it made again on another worker."""
    out = tmp_path_factory.mktemp("runs") / "tiny"
    result = run_cli(
        "run",
        "--suite",
        str(FIXTURES / "tiny_suite.toml"),
        "--zoo",
        str(FIXTURES / "tiny"),
        "--out",
        str(out),
        "--timeout",
        "300",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out

"""Zygotes kept across runs in one process (harness.runtime.kept): what keys them, and how
many are kept. No process is started: the sets kept here never ran a cell."""

from __future__ import annotations

import pytest

from harness.runtime import kept
from harness.runtime.zygote import Zygotes


@pytest.fixture
def keeping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(kept.KEEP_ENV, "1")
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "1")


def test_what_a_library_sets_on_import_does_not_change_the_key(
    keeping: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """onnxruntime_genai sets ORT_LIB_PATH in the process that imports it: a zygote kept
    before the first import still serves; another variable is another environment."""
    monkeypatch.delenv("ORT_LIB_PATH", raising=False)
    before = kept.key()
    monkeypatch.setenv("ORT_LIB_PATH", "/somewhere/libonnxruntime.so")
    assert kept.key() == before is not None
    monkeypatch.setenv("HARNESS_TEST_KEPT_KEY", "another")
    assert kept.key() != before


def test_nothing_is_kept_with_the_warm_up_on(
    keeping: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HARNESS_SKIP_WARM_UP", "0")
    assert kept.key() is None


def test_only_the_last_kept_zygotes_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MOST_KEPT sets the oldest is shut down: an environment never seen again (a
    test's own) holds no process for the rest of the run."""
    monkeypatch.setattr(kept, "_stash", [])  # this process's kept zygotes stay kept
    sets = [Zygotes() for _ in range(kept.MOST_KEPT + 1)]
    keys = [(f"harness-test-only-the-last-{i}",) for i in range(len(sets))]
    for key, zygotes in zip(keys, sets, strict=True):
        kept.release(key, zygotes)
    assert kept.take(keys[0]) is None
    assert [kept.take(key) for key in keys[1:]] == sets[1:]

"""Fixtures of the end-to-end tier: real `harness` commands over real run directories, in
the test's process and without Ray (`run_cli`: `harness run --local`, the same driver loop,
zygotes and cells as a Ray run). Every test under tests/e2e/ is marked `e2e` and `slow`
(tests/conftest.py), so the fast tier (`make test`) leaves them out."""

from __future__ import annotations

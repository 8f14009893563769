# The harness's own benchmarks (issue 9). Results: benchmarks/results/{benchmark.json,summary.md}
.PHONY: bench bench-quick bench-opinfo test test-slow test-all

bench:
	python -m pytest benchmarks -q -p no:cacheprovider --benchmark-json=benchmarks/results/benchmark.json

# Without the 5-run noise and calibration benchmark, the 10 000-cell scale benchmark, the
# 10-try node-loss benchmark, the transformers sweep, the OpInfo suite's full matrix and the
# paired calibration.
bench-quick:
	python -m pytest benchmarks -q -p no:cacheprovider -k "not noise and not scale and not node_loss and not opinfo and not transformers_sweep and not paired_calibration" --benchmark-json=benchmarks/results/benchmark.json

# The OpInfo suite at nightly size (benchmarks/test_opinfo.py).
bench-opinfo:
	python -m pytest benchmarks/test_opinfo.py -q -p no:cacheprovider --benchmark-json=benchmarks/results/benchmark-opinfo.json

# The tests, in tiers (tests/conftest.py marks them). The fast tier: everything but the
# tests marked slow (tests/e2e/: real run directories in-process without Ray; tests/ray/:
# what only Ray does; and the slow tests elsewhere), spread over the cores.
test:
	python -m pytest -q -m "not slow" -n auto

# The slow tiers alone: tests/e2e/ spread over the cores, tests/ray/ one at a time.
test-slow:
	python -m pytest -q -m "slow" -n auto --dist loadgroup

# Every tier, the whole suite: the README's test command and what CI runs.
test-all:
	python -m pytest -q -n auto --dist loadgroup

# The harness's own benchmarks (issue 9). Results: benchmarks/results/{benchmark.json,summary.md}
.PHONY: bench bench-quick bench-opinfo test test-e2e test-all

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

# The tests, in two tiers (tests/conftest.py marks them). The fast tier: everything but the
# end-to-end tests (tests/e2e/: real `harness run` processes, each with its own Ray instance)
# and the tests marked slow, spread over the cores; a few minutes on 2 cores.
test:
	python -m pytest -q -m "not e2e and not slow" -n auto

# The slow tier alone: the e2e tests in their two groups, each one test at a time, and the
# slow tests beside them.
test-e2e:
	python -m pytest -q -m "e2e or slow" -n auto --dist loadgroup

# Both tiers, the whole suite: the README's test command and what CI runs.
test-all:
	python -m pytest -q -n auto --dist loadgroup

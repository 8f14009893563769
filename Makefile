# The harness's own benchmarks (issue 9). Results: benchmarks/results/{benchmark.json,summary.md}
.PHONY: bench bench-quick test

bench:
	python -m pytest benchmarks -q -p no:cacheprovider --benchmark-json=benchmarks/results/benchmark.json

# Without the 5-run noise and calibration benchmark, the 10 000-cell scale benchmark and
# the 10-try node-loss benchmark.
bench-quick:
	python -m pytest benchmarks -q -p no:cacheprovider -k "not noise and not scale and not node_loss and not paired_calibration" --benchmark-json=benchmarks/results/benchmark.json

test:
	python -m pytest -q

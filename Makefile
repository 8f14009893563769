# The harness's own benchmarks (issue 9). Results: benchmarks/results/{benchmark.json,summary.md}
.PHONY: bench bench-quick bench-opinfo test

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

test:
	python -m pytest -q

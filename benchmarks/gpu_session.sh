#!/usr/bin/env bash
# The GPU checks of issue 39, as run on a lent GPU machine (the device tool; docs/guide/gpu.md).
# That machine has torch, onnx, onnxscript and onnxruntime (CPU build) but no network: the
# wheels it lacks (onnxruntime-gpu, ray and ray's jsonschema) travel as xz archives of
# their unpacked files, split into parts under .gpu/ (each call carries some: a call
# carries at most 64 MiB), and are unpacked into /tmp/site, ahead of the machine's own
# packages on PYTHONPATH.
#
#   bash benchmarks/gpu_session.sh stash   # keep this call's parts on the warm machine
#   bash benchmarks/gpu_session.sh probe   # unpack onnxruntime-gpu; cells through the zygote, no Ray
#   bash benchmarks/gpu_session.sh full    # unpack ray; smoke + vision on CUDA, runs, fidelity
set -uo pipefail
STEP=${1:?stash, probe or full}
OUT=${OUT:-/tmp/gpu-out}
PARTS=/tmp/gpu-parts
SITE=/tmp/site
RUNS=/tmp/runs
mkdir -p "$OUT" "$PARTS" "$SITE" "$RUNS"
cp -n .gpu/*.part* "$PARTS"/ 2>/dev/null
ls -la "$PARTS"
[ "$STEP" = stash ] && exit 0

unpack() {  # NAME: its parts, in order, unpacked once
    [ -e "$SITE/.$1" ] && return 0
    cat "$PARTS/$1".part* | xz -d -T0 | tar -C "$SITE" -x && touch "$SITE/.$1"
}
unpack ort || exit 1
PY=$(command -v python3)
NVIDIA=$("$PY" -c "import nvidia, os; print(os.path.dirname(nvidia.__path__[0]))" 2>/dev/null)
LIBS=$(ls -d "$NVIDIA"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export PYTHONPATH="$PWD:$SITE" LD_LIBRARY_PATH="${LIBS}${LD_LIBRARY_PATH:-}" PYTHONUNBUFFERED=1
nvidia-smi -L
"$PY" -c "import torch, onnxruntime as o, onnx, onnxscript; print('torch', torch.__version__, torch.version.cuda, 'ort', o.__version__, o.get_available_providers(), 'onnx', onnx.__version__, 'onnxscript', onnxscript.__version__)"

if [ "$STEP" = probe ]; then
    timeout 120 "$PY" benchmarks/gpu_check.py probe | tee "$OUT/probe.json"
    exit 0
fi

unpack ray || exit 1
"$PY" -c "import ray; print('ray', ray.__version__)"
HARNESS=("$PY" -m harness.cli)
start=$(date +%s)
timeout 80 "${HARNESS[@]}" run --suite smoke --devices cpu,cuda --keep-onnx --repro-bound 0 \
    --out "$RUNS/smoke-cuda" 2>&1 | tail -25
echo "smoke: $(( $(date +%s) - start )) s"; start=$(date +%s)
timeout 230 "${HARNESS[@]}" run --suite vision --devices cuda --opsets 18 --keep-onnx --repro-bound 0 \
    --out "$RUNS/vision-cuda" 2>&1 | tail -25
echo "vision: $(( $(date +%s) - start )) s"
tar -czf "$OUT/runs.tar.gz" -C "$RUNS" --exclude='*.onnx' --exclude='*.onnx.data' --exclude='*.pt' .
"$PY" benchmarks/gpu_check.py runs "$RUNS"/smoke-cuda "$RUNS"/vision-cuda | tee "$OUT/runs.json"
timeout 60 "$PY" benchmarks/gpu_check.py fidelity "$RUNS"/vision-cuda | tee "$OUT/fidelity.jsonl"

#!/usr/bin/env bash
# The GPU checks of issue 23 on one CUDA device, about 8 minutes in all (each step under its own timeout):
#   1. the CUDA tests of the torch backend (forward and device peak, checkpoint plans within budget on CUDA);
#   2. bench_backends.py's three training models on CUDA (one round: the torch backend eager vs PyTorch by hand);
#   3. bench_backends.py --gpt2: a GPT-2-small block stack (12 blocks, d=768, seq 1024) gradient step on the
#      torch backend vs the same stack in PyTorch eager (target <= 1.15x), and under a checkpoint plan at half
#      its activation memory (target: torch.cuda.max_memory_allocated <= 0.6x the unplanned run's).
# Run from anywhere: bash benchmarks/gpu_check.sh [output file]. Prints every table; exit status 1 if a step failed.
set -u
cd "$(dirname "$0")/.."
export PYTHONPATH="$PWD"
out="${1:-/dev/null}"  # tee prints to stdout already
status=0
run() {  # run <seconds> <label> <command...>
    local limit=$1 label=$2
    shift 2
    echo "== $label (limit ${limit}s)" | tee -a "$out"
    local t0=$SECONDS
    timeout "$limit" "$@" 2>&1 | tee -a "$out"
    local rc=${PIPESTATUS[0]}
    echo "== $label: exit $rc after $((SECONDS - t0)) s" | tee -a "$out"
    [ "$rc" -eq 0 ] || status=1
}
python -c "import torch, sys; ok = torch.cuda.is_available(); print(torch.__version__, torch.cuda.get_device_name() if ok else 'no CUDA device'); sys.exit(0 if ok else 1)" \
    || { echo "no CUDA device: nothing to check"; exit 1; }
echo "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-(unset)}" | tee -a "$out"
run 150 "CUDA tests" python -m pytest -q -p no:cacheprovider -k cuda \
    tests/runtime/test_torch_backend.py tests/runtime/test_torch_checkpoint.py
run 130 "training models on CUDA" python benchmarks/bench_backends.py --device cuda --rounds 1 --steps 10 --no-compiled \
    --threads 4
run 200 "GPT-2-small block stack" python benchmarks/bench_backends.py --models "" --gpt2 --steps 5
exit $status

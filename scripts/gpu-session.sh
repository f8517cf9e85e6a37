#!/usr/bin/env bash
# One GPU session's checks, in the order they matter, each under its own time limit and logged to
# $OUT (the folder a rented machine sends back; ./gpu-logs where it is unset). Run from the
# checkout on the GPU machine with the wheels of scripts/gpu-wheels.sh carried as .whl/:
#   bash scripts/gpu-session.sh first     the CUDA tests (unit patching, necessity, neurons, CD-T,
#                                         the API, Best-of-N variants), then gpu_check.py's
#                                         correctness, timings, long prompts and profile
#   bash scripts/gpu-session.sh second    the bridge part, the batch line, every method as a test
#   bash scripts/gpu-session.sh PART...   the parts named (cuda-tests gpu-check timings profile syncs bridge
#                                         batch every-method), to run again what a fix touched
# Two calls because a rented machine's session is short: the first half's failures can be fixed
# before the second. docs/benchmarks.md ("The GPU check") records what each printed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-logs}
mkdir -p "$OUT" /tmp/site
# NO_WHEELS=1: a dry run where the packages are installed already (CIRCUITVIZ_GPU_TEST_DEVICE=cpu)
[ -n "${NO_WHEELS:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
    --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:.:benchmarks HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1

part() {  # part NAME SECONDS COMMAND...: run it, log it, say how it ended
    local name=$1 seconds=$2
    shift 2
    local start=$SECONDS
    timeout "$seconds" "$@" >"$OUT/$name.log" 2>&1
    echo "$name: exit $? after $((SECONDS - start)) s (limit $seconds s)" | tee -a "$OUT/summary.log"
}

nvidia-smi -L | tee "$OUT/summary.log"
python3 -c "import torch, transformers, transformer_lens; print('torch', torch.__version__, 'transformers', transformers.__version__, 'TL', transformer_lens.__version__ if hasattr(transformer_lens, '__version__') else '3.9')" | tee -a "$OUT/summary.log"
run_named() {
    case "$1" in
    cuda-tests) part cuda-tests 120 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k "not every_method" ;;
    gpu-check) part gpu-check 330 python3 benchmarks/gpu_check.py --skip bridge ;;
    timings) part timings 200 python3 benchmarks/gpu_check.py --skip correctness,long,bridge --shapes gemma-3-270m ;;
    profile) part profile 150 python3 benchmarks/gpu_check.py --skip correctness,timings,long,bridge --profile eap-ig,circuit-lasso,edge-pruning ;;
    bridge)  # with .whl-tf/ (gpu-wheels.sh --transformers): transformers 5.25 for this part only
        if ls .whl-tf/*.whl >/dev/null 2>&1; then
            python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
                --target /tmp/site-tf .whl-tf/*.whl || return 1
            PYTHONPATH=/tmp/site-tf:$PYTHONPATH part bridge 300 python3 -c "import transformers, sys; print('transformers', transformers.__version__); sys.argv[0] = 'gpu_bridge_check'; import runpy; runpy.run_path('benchmarks/gpu_bridge_check.py', run_name='__main__')"
        else
            part bridge 300 python3 benchmarks/gpu_bridge_check.py
        fi ;;
    batch) part batch 120 python3 benchmarks/bench_batch.py --part gpu --n 128 ;;
    syncs) part syncs 150 python3 benchmarks/gpu_syncs.py --svd ${SYNC_METHODS:+--methods $SYNC_METHODS} ;;  # SYNC_METHODS=bon,...
    every-method) part every-method 100 python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu.py -k every_method ;;
    *) echo "unknown part $1" | tee -a "$OUT/summary.log" ;;
    esac
}
case "${1:-first}" in
first) for name in cuda-tests gpu-check profile; do run_named $name; done ;;
second) for name in bridge batch every-method; do run_named $name; done ;;
*) for name in "$@"; do run_named "$name"; done ;;
esac

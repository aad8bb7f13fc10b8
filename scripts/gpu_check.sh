#!/usr/bin/env bash
# The CUDA checks, on a machine with a GPU (CI has none). One short run, each step under its own
# time limit, logs under $OUT (default out/gpu):
#   1. tests/test_cuda.py: fused attention kernels, CPU == GPU with the same weights, search
#      invariants, bf16 autocast training, resume and translation on the GPU, no host sync in an
#      update (eager, padded, compiled, CUDA graphs);
#   2. the GPU figures: benchmarks/train_throughput.py and decode_speed.py with --device cuda
#      (aiayn beside torch.nn.Transformer and HF Marian, in one run); train_gpu.py: the real
#      `aiayn train` path beside the bare compiled loop and nn.Transformer (issue 38);
#   3. the paper's base model's training MFU in bf16 at 32k tokens per step, eager and compiled;
#      two rows of `aiayn table3` trained and scored on the GPU;
#   4. the whole test suite with the GPU visible (train.device=auto then means CUDA), in parallel,
#      for as long as SUITE_S seconds allow.
# Uses the python3 that holds a CUDA build of torch, and src/ on PYTHONPATH (no install). Packages
# it lacks may travel as wheels in .whl/ (see the device notes), installed to /tmp/site.
#
#     bash scripts/gpu_check.sh            # then read $OUT/*.log
#     SUITE_S=0 bash scripts/gpu_check.sh  # the checks and figures, without the suite
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
step() {  # step NAME SECONDS COMMAND...: run, log to $OUT/NAME.log, say how it ended
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s): $*"
    local t0=$SECONDS
    timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
    echo "== $name: exit $? after $((SECONDS - t0))s"
    tail -n "${TAIL:-25}" "$OUT/$name.log"
}
python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" || {
    echo "gpu_check.sh: torch sees no CUDA GPU here (a CUDA build of torch and a GPU are needed)" >&2
    exit 2
}
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda,
      torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())"
step test_cuda 120 python3 -m pytest -q -ra -s -p no:cacheprovider tests/test_cuda.py
step train_throughput 120 python3 benchmarks/train_throughput.py --device cuda --bf16 \
    --batch 128 --tokens 64 --steps 10 --rounds 2
# Issue 31's GPU figure: the paper's base model in bf16 at 32k target tokens per step (§5.1's
# batches hold ~25k), eager and under torch.compile (with its graph-break count), MFU against
# the bf16 peak measured in the same run.
step train_mfu "${MFU_S:-240}" python3 benchmarks/train_throughput.py --device cuda --bf16 \
    --compile --systems aiayn --configs base --batch 512 --tokens 64 --steps 10 --rounds 2
# Issue 38: `aiayn train` (the trainer, its batch thread, the loss) beside the bare compiled
# model+loss loop and a torch.nn.Transformer loop, base config in bf16: tokens/s, MFU against the
# peak measured in the same run, first (compiled) update, memory peak; then the demo's.
step train_gpu "${TRAIN_GPU_S:-300}" python3 benchmarks/train_gpu.py --device cuda \
    --json "$OUT/train_gpu.json"
step train_gpu_demo 120 python3 benchmarks/train_gpu.py --device cuda --config demo \
    --steps 200 --warmup 20 --no-compile
# The demo (0.9M parameters) compiled and replayed as CUDA graphs (train.cuda_graphs), its
# lengths padded to 16 (train.pad_to_multiple): the small model's launch overhead gone.
step train_gpu_demo_graphs 180 python3 benchmarks/train_gpu.py --device cuda --config demo \
    --steps 200 --warmup 20 --compile --set train.cuda_graphs=true train.pad_to_multiple=16
step decode_speed 60 python3 benchmarks/decode_speed.py --device cuda --batch 256 --repeats 5
# Issue 32 on a GPU: two rows of Table 3 end to end (trained, scored, tabled; --jobs auto is one
# row at a time there), on a tiny budget.
step table3 120 python3 -m aiayn table3 --rows base,A-h1 --updates 40 --corpus dates-numbers \
    --dev-pairs 100 --out "$OUT/table3-$(date +%s)" train.device=cuda
# In parallel and with a per-test limit where pytest-xdist and pytest-timeout are installed.
PARALLEL=$(python3 -c "import xdist" 2>/dev/null && echo "-n 12")
LIMIT=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout 120")
# shellcheck disable=SC2086
[ "${SUITE_S:-180}" -gt 0 ] && TAIL=60 step suite "${SUITE_S:-180}" python3 -m pytest -q -ra -p no:cacheprovider $PARALLEL \
    $LIMIT --ignore tests/viz/test_server_browser.py --ignore tests/test_wheel.py \
    --ignore tests/test_cuda.py tests

#!/usr/bin/env bash
# The CUDA checks, on a machine with a GPU (CI has none). One run, each step under its own time
# limit, the most wanted first (a lease's call is 10 minutes; the steps through test_cuda take
# about 8 of them).
# Every step's log is appended to $OUT/gpu_check.log (default out/gpu), beside train_gpu.json
# and profile.txt (a lease brings back 8 files at most):
#   1. train_gpu.py (issue 38): the real `aiayn train` path beside the bare loop and
#      nn.Transformer, base config in bf16, eager with a profile of where the host time goes,
#      then compiled (the layers, one region each); the demo eager (profiled), and without the
#      batch thread;
#   2. tests/test_cuda.py: fused attention kernels, CPU == GPU with the same weights, search
#      invariants, bf16 autocast training, resume and translation on the GPU, no host sync in an
#      update (eager, padded, compiled, CUDA graphs);
#   3. the demo compiled as CUDA graphs; train_throughput.py and decode_speed.py with --device
#      cuda (aiayn beside torch.nn.Transformer and HF Marian, in one run); the paper's base
#      model's training MFU in bf16 at 32k tokens per step; two rows of `aiayn table3`;
#   4. the whole test suite with the GPU visible (train.device=auto then means CUDA), in parallel,
#      for as long as SUITE_S seconds allow.
# Uses the python3 that holds a CUDA build of torch, and src/ on PYTHONPATH (no install). Packages
# it lacks may travel as wheels in .whl/ (see the device notes), installed to /tmp/site: on the
# lent H100/H200 image (torch 2.11) those were babel, num2words and docopt (the dates-numbers
# corpus), e.g. `pip download --no-deps -d .whl babel num2words` and `pip wheel --no-deps -w
# .whl docopt==0.6.2`, .whl carried.
#
#     bash scripts/gpu_check.sh            # then read $OUT/gpu_check.log
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
LOG=$OUT/gpu_check.log
step() {  # step NAME SECONDS COMMAND...: run, append its output to $LOG, say how it ended
    local name=$1 limit=$2; shift 2
    echo "== $name (limit ${limit}s): $*" | tee -a "$LOG"
    local t0=$SECONDS
    timeout "$limit" "$@" > /tmp/gpu_check_step.log 2>&1
    echo "== $name: exit $? after $((SECONDS - t0))s" | tee -a "/tmp/gpu_check_step.log"
    grep -v "DEBUG" /tmp/gpu_check_step.log >> "$LOG"
    grep -v "^\s*$" /tmp/gpu_check_step.log | grep -v "DEBUG" | tail -n "${TAIL:-25}"
}
python3 -c "import sys, torch; sys.exit(not torch.cuda.is_available())" || {
    echo "gpu_check.sh: torch sees no CUDA GPU here (a CUDA build of torch and a GPU are needed)" >&2
    exit 2
}
nvidia-smi -L
python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda,
      torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())"
# Issue 38: `aiayn train` (the trainer, its batch thread, the loss) beside the bare model+loss
# loop and a torch.nn.Transformer loop, base config in bf16: tokens/s, MFU against the peak
# measured in the same run, first update, memory peak; eager with a profile of 5 updates each
# (--profile slows those: the eager figure of record is the run without it, next), compiled.
step train_gpu_eager_profiled 90 python3 benchmarks/train_gpu.py --device cuda --steps 40 \
    --warmup 10 --no-compile --profile "$OUT/profile.txt"
step train_gpu_eager 90 python3 benchmarks/train_gpu.py --device cuda --steps 80 --warmup 15 \
    --no-compile
step train_gpu "${TRAIN_GPU_S:-200}" python3 benchmarks/train_gpu.py --device cuda --steps 120 \
    --warmup 30 --json "$OUT/train_gpu.json"
step train_gpu_demo 90 python3 benchmarks/train_gpu.py --device cuda --config demo \
    --steps 300 --warmup 30 --no-compile --profile "$OUT/profile.txt"
# The same without the batch thread (train.prefetch=0: each batch built and pinned on the main
# thread when the update takes it): whether the thread is where the demo's host time goes.
step train_gpu_demo_no_thread 60 python3 benchmarks/train_gpu.py --device cuda --config demo \
    --steps 300 --warmup 30 --no-compile --set train.prefetch=0
TAIL=40 step test_cuda 150 python3 -m pytest -q -ra -p no:cacheprovider \
    $(python3 -c "import xdist" 2>/dev/null && echo "-n 4") tests/test_cuda.py
# The demo (0.9M parameters) compiled and replayed as CUDA graphs (train.cuda_graphs), its
# lengths padded to 16 (train.pad_to_multiple): the small model's launch overhead gone.
step train_gpu_demo_graphs 120 python3 benchmarks/train_gpu.py --device cuda --config demo \
    --steps 300 --warmup 40 --compile --set train.cuda_graphs=true train.pad_to_multiple=16
step train_throughput 120 python3 benchmarks/train_throughput.py --device cuda --bf16 \
    --batch 128 --tokens 64 --steps 10 --rounds 2
# Issue 31's GPU figure: the paper's base model in bf16 at 32k target tokens per step (§5.1's
# batches hold ~25k), eager and under torch.compile (with its graph-break count), MFU against
# the bf16 peak measured in the same run.
step train_mfu "${MFU_S:-240}" python3 benchmarks/train_throughput.py --device cuda --bf16 \
    --compile --systems aiayn --configs base --batch 512 --tokens 64 --steps 10 --rounds 2
step decode_speed 60 python3 benchmarks/decode_speed.py --device cuda --batch 256 --repeats 5
# Issue 32 on a GPU: two rows of Table 3 end to end (trained, scored, tabled; --jobs auto is one
# row at a time there), on a tiny budget.
step table3 120 python3 -m aiayn table3 --rows base,A-h1 --updates 40 --corpus dates-numbers \
    --dev-pairs 100 --out "/tmp/table3-$(date +%s)" train.device=cuda
# In parallel and with a per-test limit where pytest-xdist and pytest-timeout are installed.
PARALLEL=$(python3 -c "import xdist" 2>/dev/null && echo "-n 12")
LIMIT=$(python3 -c "import pytest_timeout" 2>/dev/null && echo "--timeout 120")
# shellcheck disable=SC2086
[ "${SUITE_S:-180}" -gt 0 ] && TAIL=60 step suite "${SUITE_S:-180}" python3 -m pytest -q -ra -p no:cacheprovider $PARALLEL \
    $LIMIT --ignore tests/viz/test_server_browser.py --ignore tests/test_wheel.py \
    --ignore tests/test_cuda.py tests

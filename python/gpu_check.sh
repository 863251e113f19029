#!/usr/bin/env bash
# GPU check of the convred Python package, on a machine with CUDA GPUs, PyTorch with CUDA and nvcc, and no
# internet. From the repository root:
#     bash python/gpu_check.sh
# Steps: build the extension (pip --no-build-isolation --no-deps into build-py/site; falls back to
# `setup.py build_ext --inplace` if pip cannot build a wheel here), run the pytest suite (-v), the
# KernelBench-style check of the seed model for every math, and with 2+ GPUs the torchrun DDP check on two
# GPUs. Logs (and pytest's junit XML) go to $OUT when it is set, else to build-py/. Exit status: non-zero if
# any step failed. Environment: CONVRED_CUDA_ARCH (default "90a;80"), MAX_JOBS (default nproc),
# PYTHON (default python3), KB_TRIALS (timing trials, default 100).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
WORK=build-py
LOGS=${OUT:-$WORK}
mkdir -p "$WORK" "$LOGS"
export MAX_JOBS=${MAX_JOBS:-$(nproc)}
export CONVRED_CUDA_ARCH=${CONVRED_CUDA_ARCH:-90a;80}
RESULTS=()
T0=$(date +%s)

note() { echo; echo "=== [gpu_check] $*"; }
record() { RESULTS+=("$(printf '%-34s %s (%s s)' "$1" "$2" "$3")"); }

note "environment"
nvidia-smi -L 2>/dev/null || echo "(no nvidia-smi)"
nvcc --version | tail -1
$PY -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())"

NVCC_MAJOR=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
TORCH_MAJOR=$($PY -c "import torch; print((torch.version.cuda or '0').split('.')[0])")
if [ "$NVCC_MAJOR" != "$TORCH_MAJOR" ]; then
  echo "[gpu_check] WARNING: nvcc is CUDA $NVCC_MAJOR, torch is built with CUDA $TORCH_MAJOR: building with CONVRED_ALLOW_CUDA_MISMATCH=1 (python/setup.py says why)"
  export CONVRED_ALLOW_CUDA_MISMATCH=1
fi

note "build (CONVRED_CUDA_ARCH=$CONVRED_CUDA_ARCH, MAX_JOBS=$MAX_JOBS)"
t=$(date +%s)
rm -rf "$WORK/site"
if $PY -m pip install --no-build-isolation --no-deps --no-index --target "$WORK/site" ./python >"$LOGS/build.log" 2>&1; then
  SITE=$(cd "$WORK/site" && pwd)
  rc=0
else
  echo "pip could not build (see $LOGS/build.log); trying setup.py build_ext --inplace"
  (cd python && $PY setup.py build_ext --inplace) >>"$LOGS/build.log" 2>&1
  rc=$?
  SITE=$(cd python && pwd)
fi
tail -3 "$LOGS/build.log"
record "build" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" $(($(date +%s) - t))
if [ $rc -ne 0 ]; then
  grep -E "error|Error" "$LOGS/build.log" | head -20
  echo "[gpu_check] build failed"; exit 1
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
$PY -c "import convred, torch; print('convred from', convred.__file__)"

note "pytest"
t=$(date +%s)
$PY -c "import pytest" 2>/dev/null || echo "[gpu_check] pytest is not installed for $PY (pip install pytest): the next step fails"
$PY -m pytest -v -rs python/tests --junitxml="$LOGS/pytest-junit.xml" -p no:cacheprovider 2>&1 | tee "$LOGS/pytest.log"
rc=${PIPESTATUS[0]}
# exit 5 = no test collected: a failure here
record "pytest" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc=$rc)") $(tail -1 "$LOGS/pytest.log" | tr -d '=')" $(($(date +%s) - t))

note "KernelBench-style check (seed model)"
t=$(date +%s)
$PY examples/python/kernelbench_check.py --maths tf32,fp16,bf16,tf32x3,accurate,ieee --trials "${KB_TRIALS:-100}" 2>&1 | tee "$LOGS/kernelbench.txt"
rc=${PIPESTATUS[0]}
record "kernelbench_check" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc=$rc)")" $(($(date +%s) - t))

NGPU=$($PY -c "import torch; print(torch.cuda.device_count())")
if [ "$NGPU" -ge 2 ]; then
  note "torchrun DDP check on 2 GPUs"
  t=$(date +%s)
  NCCL_NVLS_ENABLE=0 $PY -m torch.distributed.run --standalone --nproc_per_node=2 examples/python/ddp_example.py --check \
    2>&1 | tee "$LOGS/ddp.txt"
  rc=${PIPESTATUS[0]}
  record "ddp 2-GPU check" "$([ $rc -eq 0 ] && echo ok || echo "FAILED (rc=$rc)")" $(($(date +%s) - t))
else
  record "ddp 2-GPU check" "skipped ($NGPU GPU)" 0
fi

note "summary ($(($(date +%s) - T0)) s)"
status=0
for r in "${RESULTS[@]}"; do
  echo "  $r"
  case "$r" in *FAILED*) status=1 ;; esac
done
exit $status

#!/usr/bin/env bash
# The one script for the GPU machine (an H200 with the CUDA Toolkit). From the repository root:
#
#   bash bench/gpu_check.sh                 # every step
#   bash bench/gpu_check.sh build           # only some steps (build-gpu/ is reused between calls), e.g.
#   bash bench/gpu_check.sh tests example sanitizer bench
#
# Steps: configure (Release, Ninja, sm_90a, in build-gpu/, CONVRED_PTXAS_VERBOSE=ON), build (everything,
# all cores; the examples' and benchmarks' ptxas -v report -> $OUT/ptxas.txt), gpu (nvidia-smi -L), tests (convred_tests,
# every suite incl. gpu), example (examples/01_conv_scale_min on the seed case, exact and with --math
# tf32 / tf32x3 / bf16 / fp16; then examples 02, 03 and 04), photos (example 01 on a
# batch of real photographs vs float64 and PyTorch: examples/01_conv_scale_min/real_photos.py), sanitizer
# (bench/sanitize.sh: compute-sanitizer memcheck, racecheck, synccheck, initcheck on convred_tests
# --test-case='*sanitizer*', >= 100 small problems over every kernel), fuzz (bench/fuzz.sh: FUZZ_N=3000
# time-seeded differential fuzz problems vs float64; FUZZ_SEED repeats a run),
# bench (every executable in build-gpu/bench/; conv_reduce_bench writes bench_results.json, then
# bench/pytorch_baseline.py adds the PyTorch rows: bench_combined.json, bench_results.png; all in the log
# folder; BENCH_PYTORCH=0 skips the Python part; BENCH_ARGS / PT_ARGS add arguments to the two, e.g.
# BENCH_ARGS='--cases suite,seed --iters 20' PT_ARGS='--cases suite,seed --iters 20'; with the convred package
# importable, e.g. PYTHONPATH from python/gpu_check.sh, the PyTorch op's rows are added: --convred-op).
# Optional, only when named (not part of "every step"): sweep (bench/torchvision_sweep.py, issue 32: every
# distinct conv layer of torchvision's models through the convred op vs PyTorch eager and torch.compile; needs
# torchvision and the convred package importable; SWEEP_ARGS, default '--sample 100000 --budget-s 300': a
# class-stratified run stopped after ~5 minutes; output in $OUT/sweep/); changes (the plans a host-side
# change moved: the newest bench/plan_changes_*.json or CHANGES, through the op and PyTorch eager, then
# bench/check_predictions.py; output in $OUT/changes/). Each step's log is teed to $OUT/<step>.log (or
# build-gpu/logs/ when OUT is unset). A failing step is recorded and later steps still run; the summary
# table (step, rc, seconds) comes last and the exit status is non-zero if any step failed.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build-gpu}
ARCH=${CUDA_ARCH:-90a}
JOBS=${JOBS:-$(nproc)}
LOGS=${OUT:-$BUILD/logs}
mkdir -p "$LOGS"
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH=/usr/local/cuda/bin:$PATH; fi

ALL_STEPS=(configure build gpu tests example photos sanitizer fuzz bench)
if [ $# -gt 0 ]; then STEPS=("$@"); else STEPS=("${ALL_STEPS[@]}"); fi

NAMES=()
RCS=()
SECS=()
T0=$(date +%s)

# run_step <name> <function>: runs it with its output teed to $LOGS/<name>.log; records rc and seconds.
run_step() {
  local name=$1 fn=$2 t rc
  echo
  echo "=================== [gpu_check] ${name}"
  t=$(date +%s)
  # Process substitution (not a pipe) keeps the step in this shell, so record() inside it counts.
  "$fn" > >(tee "$LOGS/${name}.log") 2>&1
  rc=$?
  wait $! 2>/dev/null || true  # let tee finish writing
  NAMES+=("$name")
  RCS+=("$rc")
  SECS+=("$(($(date +%s) - t))")
  echo "=================== [gpu_check] ${name}: rc=${rc}, $(($(date +%s) - t)) s"
}

# Records a sub-result (e.g. one sanitizer tool) in the summary without a separate log.
record() { NAMES+=("$1"); RCS+=("$2"); SECS+=("$3"); }

step_configure() {
  local extra=()
  # Optional cuDNN baseline for the benchmarks: PyTorch's cuDNN wheel, when there is one.
  if [ -z "${CUDNN_ROOT:-}" ] && command -v python3 >/dev/null 2>&1; then
    local d
    d=$(python3 -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null) || d=""
    if [ -n "$d" ] && [ -d "$d/include" ]; then extra+=("-DCUDNN_ROOT=$d"); fi
  fi
  echo "nvcc: $(nvcc --version | tail -1)"
  echo "cmake: $(cmake --version | head -1)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$ARCH" \
    -DCONVRED_BUILD_TESTS=ON -DCONVRED_BUILD_EXAMPLES=ON -DCONVRED_BUILD_BENCH=ON \
    -DCONVRED_PTXAS_VERBOSE=ON "${extra[@]}"
}

step_build() {
  cmake --build "$BUILD" --parallel "$JOBS" 2>&1 | tee "$BUILD/last_build.log"
  local rc=${PIPESTATUS[0]}
  ptxas_report "$BUILD/last_build.log"
  return "$rc"
}

# ptxas resource usage (registers, spills, stack, shared memory) of the examples' and benchmarks' kernels
# (built with -Xptxas -v): ninja prints each command's output right after its "[i/n] Building ..." line,
# so each object's report is cut out of this build's log ($1) and kept in $BUILD/ptxas/ (objects not rebuilt
# this time keep their earlier report); all of them, demangled, go to $LOGS/ptxas.txt.
ptxas_report() {
  mkdir -p "$BUILD/ptxas"
  awk -v dir="$BUILD/ptxas" '
    /^\[[0-9]+\/[0-9]+\] / {
      if (out != "") close(out)
      out = ""
      if ($0 ~ /Building CUDA object (examples|bench)\//) {
        obj = $NF
        gsub(/\//, "_", obj)
        out = dir "/" obj ".txt"
        print > out
      }
      next
    }
    out != "" { print >> out }
  ' "$1"
  local filt=cat
  if command -v cu++filt >/dev/null 2>&1; then filt=cu++filt; elif command -v c++filt >/dev/null 2>&1; then filt=c++filt; fi
  if ! ls "$BUILD"/ptxas/*.txt >/dev/null 2>&1; then
    echo "ptxas report: none (no example or benchmark objects built with CONVRED_PTXAS_VERBOSE)"
    return 0
  fi
  cat "$BUILD"/ptxas/*.txt | $filt >"$LOGS/ptxas.txt"
  echo "ptxas report: $LOGS/ptxas.txt ($(grep -c 'Compiling entry function' "$LOGS/ptxas.txt") kernels)"
  grep -oE 'Used [0-9]+ registers' "$LOGS/ptxas.txt" | awk '{print $2}' | sort -n |
    awk 'NR == 1 {lo = $1} {hi = $1} END {if (NR) print "registers per thread: min " lo ", max " hi " over " NR " kernels"}'
  local spills
  spills=$(grep -cE '(^|[^0-9])[1-9][0-9]* bytes stack frame|[1-9][0-9]* bytes spill (stores|loads)' "$LOGS/ptxas.txt")
  echo "kernels with a stack frame or spills: $spills (see ptxas.txt)"
}

step_gpu() {
  nvidia-smi -L || return
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu,memory.used \
    --format=csv || true
}

step_tests() { "$BUILD/tests/convred_tests"; }

step_example() {
  local ex="$BUILD/examples/01_conv_scale_min"
  if [ ! -x "$ex" ]; then
    echo "not built: $ex"
    return 1
  fi
  local rc=0 m
  "$ex" || rc=$?
  # the tensor-core precisions through the packed-filter (wgmma) path, each verified against float64
  for m in tf32 tf32x3 bf16 fp16; do
    echo "--- $ex --math $m"
    "$ex" --math "$m" || rc=$?
  done
  # examples 02-04 (small problems, fresh random data each run, each prints Passed or Failed)
  local e
  for e in 02_custom_op_half 03_channel_reduce_thrust 04_custom_kernel; do
    echo "--- $BUILD/examples/$e"
    if [ -x "$BUILD/examples/$e" ]; then "$BUILD/examples/$e" || rc=$?; else echo "not built"; rc=1; fi
  done
  return "$rc"
}

step_photos() {
  local script=examples/01_conv_scale_min/real_photos.py ex="$BUILD/examples/01_conv_scale_min"
  if [ ! -f "$script" ]; then
    echo "no $script: skipped"
    return 0
  fi
  python3 "$script" --binary "$ex" --out "$BUILD/real_input"
}

# compute-sanitizer (memcheck, racecheck, synccheck, initcheck) over every kernel and path: bench/sanitize.sh
# (the '*sanitizer*' test cases, incl. the fuzzer's >= 100 small problems); per-tool counts in its output.
step_sanitizer() { BUILD="$BUILD" LOGS="$LOGS" bash bench/sanitize.sh; }

# A time-seeded differential fuzz run of FUZZ_N (default 3000) problems: bench/fuzz.sh (FUZZ_SEED to repeat one).
step_fuzz() { BUILD="$BUILD" bash bench/fuzz.sh "${FUZZ_N:-3000}" ${FUZZ_SEED:+"$FUZZ_SEED"}; }

step_bench() {
  local rc=0 found=0 b d ldp=${LD_LIBRARY_PATH:-}
  # cuDNN from PyTorch's wheel (what the configure step links when it is there) for the loader.
  d=$(python3 -c 'import nvidia.cudnn as m, os; print(os.path.join(list(m.__path__)[0], "lib"))' 2>/dev/null) || d=""
  if [ -n "$d" ] && [ -d "$d" ]; then ldp="$d${ldp:+:$ldp}"; fi
  rm -f "$LOGS/bench_results.json"  # never merge a stale one below
  for b in "$BUILD"/bench/*; do
    [ -f "$b" ] && [ -x "$b" ] || continue
    found=1
    echo "--- $b"
    case "$(basename "$b")" in
      conv_reduce_bench)
        # shellcheck disable=SC2086
        LD_LIBRARY_PATH="$ldp" "$b" ${BENCH_ARGS:-} --json "$LOGS/bench_results.json" ||
          { rc=$?; echo "$b: rc=$rc"; } ;;
      # the host tools take files: the recorded direct sweep, the planner's snapshot
      fit_direct_model) "$b" --chooser bench/results/h200_2026-12-05_direct_sweep.txt || { rc=$?; echo "$b: rc=$rc"; } ;;
      plan_table) "$b" --expect bench/plans/h200.tsv bench/plans/layers.txt bench/plans/layers_extra.txt >/dev/null ||
          { rc=$?; echo "$b: rc=$rc"; } ;;
      *) "$b" || { rc=$?; echo "$b: rc=$rc"; } ;;
    esac
  done
  [ $found -eq 1 ] || echo "no benchmark executables in $BUILD/bench"
  # PyTorch baselines on the same cases, merged with the C++ JSON into one table, JSON and PNG
  # (BENCH_PYTORCH=0 skips them).
  if [ "${BENCH_PYTORCH:-1}" != 0 ] && python3 -c 'import torch' 2>/dev/null; then
    local cj=()
    [ -f "$LOGS/bench_results.json" ] && cj=(--convred-json "$LOGS/bench_results.json")
    # the convred PyTorch op's rows too, when the package is importable (PYTHONPATH: python/gpu_check.sh builds it)
    python3 -c 'import convred' 2>/dev/null && cj+=(--convred-op)
    echo "--- bench/pytorch_baseline.py"
    # shellcheck disable=SC2086
    python3 bench/pytorch_baseline.py ${PT_ARGS:-} ${cj[@]+"${cj[@]}"} --json "$LOGS/bench_combined.json" \
      --png "$LOGS/bench_results.png" || { rc=$?; echo "bench/pytorch_baseline.py: rc=$rc"; }
  fi
  return $rc
}

# The torchvision sweep (issue 32), only when named: bench/torchvision_sweep.py (SWEEP_ARGS; see its --help).
step_sweep() {
  if ! python3 -c 'import torchvision, convred' 2>/dev/null; then
    echo "sweep: needs torchvision and the convred package importable (PYTHONPATH: python/gpu_check.sh builds it)"
    return 1
  fi
  # shellcheck disable=SC2086
  python3 bench/torchvision_sweep.py ${SWEEP_ARGS:---sample 100000 --budget-s 300} --out-dir "$LOGS/sweep"
}

# The plans a host-side change moved, measured (only when named): the layers of CHANGES (default: the newest
# bench/plan_changes_*.json, written by bench/plan_changes.py) through the convred op and PyTorch eager
# (no torch.compile), then bench/check_predictions.py sets them beside the times the file recorded.
step_changes() {
  local changes=${CHANGES:-$(ls bench/plan_changes_*.json 2>/dev/null | sort | tail -1)}
  if [ -z "$changes" ] || ! python3 -c 'import torchvision, convred' 2>/dev/null; then
    echo "changes: needs a bench/plan_changes_*.json, torchvision and the convred package importable"
    return 1
  fi
  python3 bench/torchvision_sweep.py --layers-json "$changes" --no-compile ${CHANGES_ARGS:-} \
    --out-dir "$LOGS/changes" || return $?
  python3 bench/check_predictions.py --changes "$changes" --after "$LOGS/changes/sweep.json"
}

for s in "${STEPS[@]}"; do
  case "$s" in
    configure | build | gpu | tests | example | photos | sanitizer | fuzz | bench | sweep | changes)
      run_step "$s" "step_$s" ;;
    *) echo "unknown step '$s' (steps: ${ALL_STEPS[*]}; optional: sweep, changes)"; record "$s" 2 0 ;;
  esac
done

echo
echo "=================== [gpu_check] summary ($(hostname), logs in $LOGS)"
printf '%-22s %5s %8s\n' step rc seconds
failed=0
for i in "${!NAMES[@]}"; do
  printf '%-22s %5s %8s\n' "${NAMES[$i]}" "${RCS[$i]}" "${SECS[$i]}"
  [ "${RCS[$i]}" -eq 0 ] || failed=1
done
printf '%-22s %5s %8s\n' total "$failed" "$(($(date +%s) - T0))"
exit $failed

#!/usr/bin/env bash
# Time-seeded differential fuzz run: CONVRED_FUZZ_N random problems (default 3000) over every entry point
# (fused conv2d_reduce SIMT / mma.sync, full conv2d, channel_reduce, the packed wgmma path), each checked
# against the float64 reference (tests/fuzz.cuh), on all host threads; then N/10 random problems of certified
# screening, each checked bit for bit against the SIMT kernel (tests/test_screen_gpu.cu, "screen fuzz").
#
#   bash bench/fuzz.sh [N] [SEED]          # BUILD=build-gpu by default; SEED defaults to the time
#   CONVRED_FUZZ_TF32X3_INF=0 bash bench/fuzz.sh     # exclude tf32x3 with +-inf inputs (known fault class)
#
# Every failure prints a one-line reproducer and (for the first CONVRED_FUZZ_SHRINK=5) a shrunk one;
# re-run one with:  CONVRED_FUZZ_REPRO='<line>' $BUILD/tests/convred_tests --test-case='fuzz repro*'
# The main run prints "FUZZ RESULT: seed=... cases=... failures=... seconds=..."; the last line is the script's own
# "fuzz.sh: N=... SEED=... rc=...; screening: N=... rc=...". Exit status: the first failing run's, else 0.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build-gpu}
BIN="$BUILD/tests/convred_tests"
N=${1:-${CONVRED_FUZZ_N:-3000}}
SEED=${2:-${CONVRED_FUZZ_SEED:-$(date +%s)}}
if [ ! -x "$BIN" ]; then
  echo "fuzz.sh: $BIN not built"
  exit 1
fi
CONVRED_FUZZ_N=$N CONVRED_FUZZ_SEED=$SEED "$BIN" --test-case='fuzz random*'
rc=$?
# certified screening (docs/screening.md): N/10 random problems, bitwise against the SIMT kernel
SN=$(( N / 10 > 0 ? N / 10 : 1 ))
CONVRED_SCREEN_FUZZ_N=$SN CONVRED_SCREEN_FUZZ_SEED=$SEED "$BIN" --test-case='screen fuzz*'
src=$?
echo "fuzz.sh: N=$N SEED=$SEED rc=$rc; screening: N=$SN rc=$src"
[ "$rc" -ne 0 ] && exit $rc
exit $src

#!/usr/bin/env bash
# compute-sanitizer over every kernel and path: memcheck, racecheck, synccheck and initcheck on the test
# cases named '*sanitizer*' of convred_tests (the fuzzer's "fuzz sanitizer" case: >= 100 small problems
# covering every kernel -- SIMT, mma.sync, wgmma/packed and its fallback, each channel_reduce kernel, full
# conv2d; tails, odd pointer offsets, argmin/argmax -- plus the hand-written sanitizer cases of each suite).
#
#   bash bench/sanitize.sh                  # BUILD=build-gpu by default; logs in $LOGS (default $BUILD/logs)
#   TOOLS="memcheck racecheck" bash bench/sanitize.sh
#
# Prints, per tool: exit code, errors (ERROR SUMMARY), racecheck hazards, test cases run; then the kernels
# the fuzz sanitizer case covered. Exit status non-zero if any tool reports an error or hazard, fails a
# test, or matches no test case. Host threads: CONVRED_FUZZ_THREADS=1 (one case at a time under the tools).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build-gpu}
LOGS=${LOGS:-$BUILD/logs}
TOOLS=${TOOLS:-memcheck racecheck synccheck initcheck}
BIN="$BUILD/tests/convred_tests"
FILTER=${FILTER:-*sanitizer*}
mkdir -p "$LOGS"
if ! command -v compute-sanitizer >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
if [ ! -x "$BIN" ]; then
  echo "sanitize.sh: $BIN not built"
  exit 1
fi

rc_all=0
summary=()
for tool in $TOOLS; do
  log="$LOGS/sanitizer_$tool.log"
  t=$(date +%s)
  echo "--- compute-sanitizer --tool $tool $BIN --test-case='$FILTER'"
  CONVRED_FUZZ_THREADS=1 compute-sanitizer --tool "$tool" --error-exitcode 99 "$BIN" --test-case="$FILTER" >"$log" 2>&1
  rc=$?
  errors=$(grep -oE 'ERROR SUMMARY: [0-9]+ error' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  hazards=$(grep -oE 'RACECHECK SUMMARY: [0-9]+ hazard' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  cases=$(grep -oE 'test cases: +[0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)
  failed=$(grep -oE 'test cases: +[0-9]+ \| +[0-9]+ passed \| +[0-9]+ failed' "$log" | tail -1 | grep -oE '[0-9]+ failed' | grep -oE '[0-9]+' || true)
  # racecheck prints no ERROR SUMMARY: its errors are in "RACECHECK SUMMARY: N hazards displayed (E errors, W warnings)"
  [ -n "$errors" ] || errors=$(grep -oE 'RACECHECK SUMMARY: .*\(([0-9]+) errors' "$log" | tail -1 | grep -oE '\([0-9]+' | tr -d '(' || true)
  [ -n "$errors" ] || errors="?"
  [ -n "$hazards" ] || hazards="-"
  tail -n 6 "$log"
  if [ "${cases:-0}" = 0 ]; then
    echo "no test case matches '$FILTER'"
    [ "$rc" -ne 0 ] || rc=98
  fi
  if [ "$errors" != 0 ] || { [ "$hazards" != "-" ] && [ "$hazards" != 0 ]; }; then [ "$rc" -ne 0 ] || rc=97; fi
  [ "$rc" -eq 0 ] || rc_all=1
  summary+=("$(printf '%-10s rc=%-3s errors=%-4s hazards=%-4s test-cases=%-4s failed=%-3s %ss' "$tool" "$rc" "$errors" \
    "$hazards" "${cases:-0}" "${failed:-?}" "$(($(date +%s) - t))")")
done

echo
echo "=== fuzz sanitizer coverage (from the first tool's log)"
first=$(set -- $TOOLS; echo "$1")
awk '/^fuzz sanitizer: /{p=1} p && /^  +[0-9]+  /{print; next} p && !/^fuzz sanitizer: /{p=0} p{print}' \
  "$LOGS/sanitizer_$first.log"
echo
echo "=== compute-sanitizer summary"
printf '%s\n' "${summary[@]}"
exit $rc_all

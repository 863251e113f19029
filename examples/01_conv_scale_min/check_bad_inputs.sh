#!/usr/bin/env bash
# Host-only check of example 01's input validation (a CTest test; needs no GPU):
#   bash examples/01_conv_scale_min/check_bad_inputs.sh build/examples/01_conv_scale_min
# Every bad input below must be refused BEFORE the example looks for a GPU: exit code 1 (not 2, "no CUDA
# device") and a message naming the file or the option. Writes its .npy files by hand (no Python needed).
set -uo pipefail
BIN=${1:?usage: check_bad_inputs.sh <path to 01_conv_scale_min>}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/convred-ex01.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0

# npy <file> <descr> <shape> <data bytes>: a .npy 1.0 file (header padded to 64 bytes) with zero data.
npy() {
  local dict="{'descr': '$2', 'fortran_order': False, 'shape': $3, }"
  local len=$(( (10 + ${#dict} + 1 + 63) / 64 * 64 - 10 ))
  {
    printf '\x93NUMPY\x01\x00'
    printf "\\x$(printf %02x $((len % 256)))\\x$(printf %02x $((len / 256)))"
    printf '%-*s\n' $((len - 1)) "$dict"
    head -c "$4" /dev/zero
  } >"$1"
}

# expect <name> <text the message must contain> <args...>: exit code 1, the text on stderr.
expect() {
  local name=$1 want=$2 rc
  shift 2
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ "$rc" -eq 1 ] && grep -qF -- "$want" "$TMP/err"; then
    echo "ok   $name: $(head -1 "$TMP/err")"
  else
    echo "FAIL $name: exit $rc (want 1), stderr: $(head -2 "$TMP/err" | tr '\n' ' ') (want '$want')"
    failures=$((failures + 1))
  fi
}

npy "$TMP/x_ok.npy" '<f4' '(1, 2, 8, 8)' $((1 * 2 * 8 * 8 * 4))
npy "$TMP/x_trunc.npy" '<f4' '(1, 2, 8, 8)' $((1 * 2 * 8 * 8 * 4 - 5))
npy "$TMP/x_trail.npy" '<f4' '(1, 2, 8, 8)' $((1 * 2 * 8 * 8 * 4 + 3))
npy "$TMP/x_int.npy" '<i8' '(1, 2, 8, 8)' $((1 * 2 * 8 * 8 * 8))
npy "$TMP/x_rank3.npy" '<f4' '(2, 8, 8)' $((2 * 8 * 8 * 4))
npy "$TMP/w_ok.npy" '<f4' '(4, 2, 3, 3)' $((4 * 2 * 3 * 3 * 4))
npy "$TMP/w_trunc.npy" '<f4' '(4, 2, 3, 3)' 10
npy "$TMP/b_wrong.npy" '<f4' '(5,)' 20
printf 'not a npy file' >"$TMP/garbage.npy"

expect "truncated x" "$TMP/x_trunc.npy: truncated" --x "$TMP/x_trunc.npy" --w "$TMP/w_ok.npy" --iters 0
expect "trailing bytes in x" "$TMP/x_trail.npy: 3 unexpected bytes" --x "$TMP/x_trail.npy" --iters 0
expect "truncated W" "$TMP/w_trunc.npy: truncated" --x "$TMP/x_ok.npy" --weights "$TMP/w_trunc.npy"
expect "not a .npy file" "$TMP/garbage.npy: not a .npy file" --x "$TMP/garbage.npy"
expect "missing file" "$TMP/none.npy: cannot open" --x "$TMP/none.npy"
expect "int64 x" "$TMP/x_int.npy: x must hold floating data" --x "$TMP/x_int.npy"
expect "3-D x" "$TMP/x_rank3.npy: x must be 4-D" --x "$TMP/x_rank3.npy"
expect "b of the wrong size" "$TMP/b_wrong.npy: b must have shape (4,)" --x "$TMP/x_ok.npy" --w "$TMP/w_ok.npy" \
  --b "$TMP/b_wrong.npy"
expect "x disagrees with --c" "--c 3 disagrees with $TMP/x_ok.npy" --x "$TMP/x_ok.npy" --c 3
expect "--y-out into a missing folder" "$TMP/no/such/dir/y.npy: cannot write --y-out" --n 1 --c 2 --h 8 --w 8 \
  --k 4 --y-out "$TMP/no/such/dir/y.npy"
expect "--idx-out into a missing folder" "cannot write --idx-out" --op argmin --idx-out "$TMP/nope/i.npy"
expect "--y-out is a folder" "$TMP: cannot write --y-out: it is a folder" --y-out "$TMP"
expect "--n -1" "--n must be in [1, " --n -1
expect "--n 0 (same rule as --n -1)" "--n must be in [1, " --n 0
expect "invalid problem" "invalid problem" --h 2 --w 2
expect "bad dtype" "--dtype must be float, double, half or bf16" --dtype int8
expect "bad math" "--math must be accurate, ieee, tf32, tf32x3, bf16 or fp16" --math tf64
expect "tensor-core --math with --dtype double" "--math tf32 is a tensor-core math and takes --dtype float, half or bf16" \
  --math tf32 --dtype double
expect "--math bf16 with --dtype double" "--dtype double runs --math accurate or ieee" --math bf16 --dtype double
expect "--idx-out without an index op" "--idx-out needs --op argmin or argmax" --idx-out "$TMP/i.npy"
expect "unknown option" "unknown option '--bogus'" --bogus 1

if [ "$failures" -ne 0 ]; then
  echo "check_bad_inputs: $failures check(s) FAILED"
  exit 1
fi
echo "check_bad_inputs: all bad inputs refused before the device was touched"

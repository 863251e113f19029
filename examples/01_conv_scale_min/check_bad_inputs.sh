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

# expect <name> <text the message must contain> <args...>: exit code 1, the text on stderr, and no
# `Failed` on stdout (nothing ran: a usage error is not a failed run).
expect() {
  local name=$1 want=$2 rc
  shift 2
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
  rc=$?
  if [ "$rc" -eq 1 ] && grep -qF -- "$want" "$TMP/err" && ! grep -qx Failed "$TMP/out"; then
    echo "ok   $name: $(head -1 "$TMP/err")"
  else
    echo "FAIL $name: exit $rc (want 1), stderr: $(head -2 "$TMP/err" | tr '\n' ' ') (want '$want')," \
      "stdout: $(tail -1 "$TMP/out") (want no 'Failed')"
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

expect "truncated x" "$TMP/x_trunc.npy: truncated" --x "$TMP/x_trunc.npy" --weights "$TMP/w_ok.npy" --iters 0
expect "trailing bytes in x" "$TMP/x_trail.npy: 3 unexpected bytes" --x "$TMP/x_trail.npy" --iters 0
expect "truncated W" "$TMP/w_trunc.npy: truncated" --x "$TMP/x_ok.npy" --weights "$TMP/w_trunc.npy"
expect "not a .npy file" "$TMP/garbage.npy: not a .npy file" --x "$TMP/garbage.npy"
expect "missing file" "$TMP/none.npy: cannot open" --x "$TMP/none.npy"
expect "int64 x" "$TMP/x_int.npy: x must hold floating data" --x "$TMP/x_int.npy"
expect "3-D x" "$TMP/x_rank3.npy: x must be 4-D" --x "$TMP/x_rank3.npy"
expect "b of the wrong size" "$TMP/b_wrong.npy: b must have shape (4,)" --x "$TMP/x_ok.npy" --weights "$TMP/w_ok.npy" \
  --b "$TMP/b_wrong.npy"
expect "x disagrees with --c" "--c 3 disagrees with $TMP/x_ok.npy" --x "$TMP/x_ok.npy" --c 3
expect "--y-out into a missing folder" "$TMP/no/such/dir/y.npy: cannot write --y-out" --n 1 --c 2 --h 8 --width 8 \
  --k 4 --y-out "$TMP/no/such/dir/y.npy"
expect "--idx-out into a missing folder" "cannot write --idx-out" --op argmin --idx-out "$TMP/nope/i.npy"
expect "--y-out is a folder" "$TMP: cannot write --y-out: it is a folder" --y-out "$TMP"
# Each dimension named, whether given as an option or read from a file.
expect "--n -1" "N must be >= 1 (the batch, --n), got -1" --n -1
expect "--n 0 (same rule as --n -1)" "N must be >= 1 (the batch, --n), got 0" --n 0
expect "--c 0" "C must be >= 1 (input channels, --c), got 0" --c 0
expect "--height 0" "H must be >= 1 (input height, --height), got 0" --height 0
expect "--width 0" "W must be >= 1 (input width, --width), got 0" --width 0
expect "--k 0" "K must be >= 1 (output channels, --k), got 0" --k 0
expect "--r 0" "R must be >= 1 (kernel height, --r), got 0" --r 0
expect "--s -3" "S must be >= 1 (kernel width, --s), got -3" --s -3
expect "--pad -1" "the padding height must be >= 0" --pad -1
expect "--stride-w 0" "the stride width must be >= 1" --stride-w 0
expect "--dilation 0" "the dilation height must be >= 1" --dilation 0
expect "--groups 0" "groups must be >= 1" --groups 0
expect "--c above 2^40" "C must be <= 2^40" --c 2000000000000
npy "$TMP/w_k0.npy" '<f4' '(0, 2, 3, 3)' 0
expect "K = 0 from the weights file" "K must be >= 1 (output channels, from $TMP/w_k0.npy's shape), got 0" --x "$TMP/x_ok.npy" \
  --weights "$TMP/w_k0.npy"
expect "invalid problem" "invalid problem" --h 2 --width 2
# Integers: too long for 64 bits is out of range, not "not an integer".
expect "over-long integer" "--k 99999999999999999999 is out of range" --k 99999999999999999999
expect "over-long negative integer" "--pad -99999999999999999999 is out of range" --pad -99999999999999999999
expect "not an integer" "--k: '12abc' is not an integer" --k 12abc
expect "--iters out of range" "--iters 2000000 is out of range: it must be in [0, 1000000]" --iters 2000000
# --w was the width and the weights file: refused, the two spellings named.
expect "--w (ambiguous)" "--w is ambiguous (the input width or the weights file): use --width N or --weights FILE.npy" \
  --w 8
expect "--w FILE (ambiguous)" "use --width N or --weights FILE.npy" --w "$TMP/w_ok.npy"
# Each option once: repeated, or set again through an alias or --pad / --pad-h.
expect "--k twice" "--k is given twice (each option at most once)" --k 4 --k 8
expect "--h and --height" "--height and --h both set the input height H" --h 8 --height 9
expect "--pad and --pad-h" "--pad-h and --pad both set the padding height" --pad 1 --pad-h 2
expect "--x and --input" "--input and --x both set the x file" --x "$TMP/x_ok.npy" --input "$TMP/x_ok.npy"
expect "--no-bias and --b" "--b and --no-bias both set the bias" --no-bias --b "$TMP/b_wrong.npy"
# Outputs: not the same file twice, not an input file.
expect "--y-out = --idx-out" "--y-out and --idx-out name the same file" --op argmin --y-out "$TMP/o.npy" \
  --idx-out "$TMP/o.npy"
expect "--y-out = --idx-out (other spelling)" "--y-out and --idx-out name the same file" --op argmax \
  --y-out "$TMP/o.npy" --idx-out "$TMP/./o.npy"
expect "--y-out over the x file" "--y-out '$TMP/x_ok.npy' is the input file of --x" --x "$TMP/x_ok.npy" \
  --y-out "$TMP/x_ok.npy"
# A problem too large for the host (27.5 PB of x), refused before the device is queried.
expect "27 PB problem" "the problem is too large: x, W, b and y take 27.5 PB in float" --n 100000 --c 4096 \
  --height 4096 --width 4096
expect "bad dtype" "--dtype must be float, double, half or bf16" --dtype int8
expect "bad math" "--math must be accurate, ieee, tf32, tf32x3, bf16 or fp16" --math tf64
expect "tensor-core --math with --dtype double" "--math tf32 is a tensor-core math and takes --dtype float, half or bf16" \
  --math tf32 --dtype double
expect "--math bf16 with --dtype double" "--dtype double runs --math accurate or ieee" --math bf16 --dtype double
expect "--idx-out without an index op" "--idx-out needs --op argmin or argmax" --idx-out "$TMP/i.npy"
expect "unknown option" "unknown option '--bogus'" --bogus 1
# A run the binary does not hold (the main job's binary: float data; every op under accurate, min under
# every math) names the binary that does; skipped for 01_conv_scale_min_all, which holds every run.
if "$BIN" --help | grep -q "^  float accurate: min max sum mean argmin argmax; float ieee/tf32/tf32x3/bf16/fp16: min\$"; then
  expect "--dtype half (not in this binary)" "--dtype half --op min --math accurate is not built into" --dtype half
  expect "--op sum --math tf32 (not in this binary)" "01_conv_scale_min_all holds every combination" --op sum \
    --math tf32
fi

if [ "$failures" -ne 0 ]; then
  echo "check_bad_inputs: $failures check(s) FAILED"
  exit 1
fi
echo "check_bad_inputs: all bad inputs refused before the device was touched"

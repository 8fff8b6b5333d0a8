#!/usr/bin/env bash
# SPILL_REQUIRE_GPU=1 turns a skipped GPU test into a failure that names the
# libraries it saw; unset (or 0), a GPU test without a GPU skips and the
# binary passes. Checked on both CUDA test binaries, each with one test, on
# whatever machine this runs: without a usable GPU the test must skip, then
# fail when required; with one, it must pass either way.
#
# The binaries' own output is kept out of this test's log (a "FAILED" line
# from an expected failure would read as a failure of this test) and shown
# only when this test fails.
set -uo pipefail
# The binaries must not write their results where Bazel expects this test's.
unset GTEST_OUTPUT XML_OUTPUT_FILE
runtime_test=$1
layers_test=$2
work=${TEST_TMPDIR:-$(mktemp -d)}
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

check() {
  local name=$1 binary=$2 filter=$3
  "$binary" --gtest_filter="$filter" >"$work/$name.plain" 2>&1
  local plain=$?
  SPILL_REQUIRE_GPU=0 "$binary" --gtest_filter="$filter" >"$work/$name.zero" 2>&1
  local zero=$?
  SPILL_REQUIRE_GPU=1 "$binary" --gtest_filter="$filter" >"$work/$name.required" 2>&1
  local required=$?
  [[ $plain -eq 0 ]] || fail "$name: exit $plain without SPILL_REQUIRE_GPU"
  [[ $zero -eq 0 ]] || fail "$name: exit $zero with SPILL_REQUIRE_GPU=0"
  if grep -q '^\[  SKIPPED \]' "$work/$name.plain"; then
    echo "$name: no usable GPU here: skipped; with SPILL_REQUIRE_GPU=1 exit $required"
    [[ $required -ne 0 ]] || fail "$name: a skipped GPU test passed with SPILL_REQUIRE_GPU=1"
    grep -q 'SPILL_REQUIRE_GPU=1, but no usable GPU' "$work/$name.required" ||
      fail "$name: the failure does not say why"
    for word in driver runtime cuDNN cuBLAS; do
      grep -q "libraries seen:.*$word" "$work/$name.required" ||
        fail "$name: the failure does not name the $word version"
    done
  else
    echo "$name: a usable GPU: ran; with SPILL_REQUIRE_GPU=1 exit $required"
    [[ $required -eq 0 ]] || fail "$name: failed with SPILL_REQUIRE_GPU=1 on a GPU machine"
  fi
  if [[ $failures -gt 0 ]]; then
    for f in "$work/$name".*; do
      echo "--- $f"
      sed 's/\[  FAILED  \]/[ (failed) ]/' "$f" | tail -20
    done
  fi
}

check runtime "$runtime_test" 'CudaCopyTest.MemsetAndSynchronousCopies'
check layers "$layers_test" 'Layers/CudaLayersTest.MatchesCpu/relu'
if [[ $failures -gt 0 ]]; then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all checks passed"

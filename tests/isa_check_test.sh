#!/usr/bin/env bash
# tools/ci/check_isa.py finds AVX-512 instructions - in zmm registers and in
# EVEX-only instructions on ymm registers - and passes AVX2/FMA code.
set -uo pipefail
check=$1
avx2=$2
avx512=$3
failures=0
if ! python3 "$check" "$avx2"; then
  echo "FAIL: AVX2 and FMA code was taken for AVX-512"
  failures=$((failures + 1))
fi
out=$(python3 "$check" "$avx512")
rc=$?
echo "$out"
[[ $rc -ne 0 ]] || { echo "FAIL: AVX-512 code passed"; failures=$((failures + 1)); }
grep -q '%zmm' <<<"$out" || { echo "FAIL: no zmm instruction reported"; failures=$((failures + 1)); }
grep -q 'vpternlogd.*%ymm' <<<"$out" ||
  { echo "FAIL: the EVEX-only ymm instruction was missed"; failures=$((failures + 1)); }
python3 "$check" --report-only "$avx512" >/dev/null ||
  { echo "FAIL: --report-only failed"; failures=$((failures + 1)); }
[[ $failures -eq 0 ]] && echo "all checks passed"
exit $((failures > 0))

#!/usr/bin/env bash
# Runs the fuzz test longer than CI does, with a random seed: each generated
# case is drawn SCALE times (default 20, over 10,000 cases). A failure prints
# the seed; rerun with it to reproduce.
#
#   bash tools/ci/fuzz.sh                 # random seed, scale 20
#   bash tools/ci/fuzz.sh SEED [SCALE]    # a given seed
#   bash tools/ci/fuzz.sh --asan ...      # under AddressSanitizer + UBSan
set -uo pipefail
cd "$(dirname "$0")/../.."
config=()
if [[ "${1:-}" == "--asan" ]]; then
  config=(--config=asan)
  shift
fi
seed="${1:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
scale="${2:-20}"
echo "fuzz: seed $seed, scale $scale" >&2
bash tools/setup.sh || exit 1
bazel test "${config[@]}" --test_output=errors --nocache_test_results \
  --test_env=SPILL_FUZZ_SEED="$seed" --test_env=SPILL_FUZZ_SCALE="$scale" \
  --test_arg=--gtest_filter='FuzzTest.*' --test_timeout=7200 //tests:fuzz_test
status=$?
grep -h "^fuzz " "$(bazel info "${config[@]}" bazel-testlogs)/tests/fuzz_test/test.log" >&2
[[ $status -ne 0 ]] && echo "fuzz: FAILED with seed $seed (rerun: bash tools/ci/fuzz.sh $seed $scale)" >&2
exit $status

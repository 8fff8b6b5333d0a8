#!/usr/bin/env bash
# The test command: installs what is missing, builds everything and runs the
# test suite. Where a CUDA toolkit is installed (/usr/local/cuda) it builds
# with --config=cuda, so every CUDA target is compiled and linked too; GPU
# tests skip, saying why, on machines without a GPU. Ends with
# "N passed, M failed", counting test cases.
#
#   bash tools/test.sh                 # everything
#   bash tools/test.sh //tests:route_test
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(//...)
fi
config=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  config=(--config=cuda)
fi
bazel test "${config[@]}" --test_output=errors "${targets[@]}"
status=$?
# Count only the targets of this invocation (bazel-testlogs keeps old ones).
query=$(printf ' + %s' "${targets[@]}")
tests=$(bazel query --noshow_progress "tests(${query:3})" 2>/dev/null)
if [[ ${#config[@]} -eq 0 ]]; then  # CUDA tests were skipped: not counted
  tests=$(echo "$tests" | grep -v cuda)
fi
/usr/bin/python3 tools/test_summary.py bazel-testlogs $tests
summary=$?
if [[ $status -ne 0 && $summary -eq 0 ]]; then
  exit $status
fi
exit $summary

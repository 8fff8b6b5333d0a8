#!/usr/bin/env bash
# The test command: installs what is missing, builds everything (the CUDA
# targets too, compile and link only, when a CUDA toolkit is installed) and
# runs the test suite. Ends with "N passed, M failed", counting test cases.
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
bazel test --test_output=errors "${targets[@]}"
status=$?
# Count only the targets of this invocation (bazel-testlogs keeps old ones).
query=$(printf ' + %s' "${targets[@]}")
tests=$(bazel query --noshow_progress "tests(${query:3})" 2>/dev/null)
/usr/bin/python3 tools/test_summary.py bazel-testlogs $tests
summary=$?
if [[ $status -ne 0 && $summary -eq 0 ]]; then
  exit $status
fi
exit $summary

#!/usr/bin/env bash
# The test command: installs what is missing, builds everything and runs the
# test suite. Where a CUDA toolkit is installed (/usr/local/cuda) it builds
# with --config=cuda, so every CUDA target is compiled and linked too; GPU
# tests skip, saying why, on machines without a GPU, and the GPU bundle is
# packed and its compressed size printed (//tests:gpu_bundle_test).
#
# The full run (no arguments) also checks the format of every source
# (tools/ci/format.sh --check), that no two source files include each other
# (tools/ci/include_cycles.py) and runs the memory, parser, data, checkpoint and
# fuzz tests again under AddressSanitizer and UndefinedBehaviorSanitizer
# (tools/ci/sanitize.sh). Ends with "N passed, M failed", counting test cases of
# both runs and the format check as one case, so a failure in any makes M > 0.
#
#   bash tools/test.sh                 # everything
#   bash tools/test.sh //tests:route_test
set -uo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh || exit 1

targets=("$@")
full=0
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(//...)
  full=1
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
testlogs=$(bazel info "${config[@]}" bazel-testlogs 2>/dev/null)
summary=(--logs "" "$testlogs" $tests)
# The GPU bundle the CUDA build makes (//tests:gpu_bundle_test) and its
# compressed size, for CI's log.
if [[ ${#config[@]} -gt 0 ]] && echo "$tests" | grep -q gpu_bundle_test; then
  grep -h "^gpu bundle:" "$testlogs/tests/gpu_bundle_test/test.log" 2>/dev/null ||
    echo "gpu bundle: not built (see //tests:gpu_bundle_test)"
fi

if [[ $full -eq 1 ]]; then
  bash tools/ci/format.sh --check
  format=$?
  # Every source folder but framework/onnx (whose importer has a private
  # header of its own) as one graph: no two units include each other.
  /usr/bin/python3 tools/ci/include_cycles.py --self-test &&
    /usr/bin/python3 tools/ci/include_cycles.py memory layers data tools framework/base \
      framework/device framework/schedule framework/config framework/graph framework/io \
      framework/solver framework/cuda framework/distributed
  cycles=$?
  bash tools/ci/sanitize.sh --no-setup
  sanitized=$?
  [[ $status -eq 0 ]] && status=$sanitized
  summary+=(--logs "asan" "$(bazel info --config=asan bazel-testlogs 2>/dev/null)"
            $(bash tools/ci/sanitize.sh --targets))
  summary+=(--check "format check (tools/ci/format.sh --check)" "$format")
  summary+=(--check "include cycles (tools/ci/include_cycles.py)" "$cycles")
fi
/usr/bin/python3 tools/ci/test_summary.py "${summary[@]}"
summary_status=$?
if [[ $status -ne 0 && $summary_status -eq 0 ]]; then
  exit $status
fi
exit $summary_status

#!/usr/bin/env bash
# Runs the memory, parser, data, checkpoint and fuzz tests under
# AddressSanitizer and UndefinedBehaviorSanitizer (bazel --config=asan, see
# .bazelrc): a memory error, a leak or any undefined behaviour fails the test.
# tools/test.sh runs it as part of CI; tools/ci/tsan.sh is the ThreadSanitizer
# counterpart.
#
#   bash tools/ci/sanitize.sh                  # the CI set
#   bash tools/ci/sanitize.sh //tests:x ...    # other tests
#   bash tools/ci/sanitize.sh --targets        # print the CI set
set -uo pipefail
cd "$(dirname "$0")/../.."
ci_targets=(//tests:memory_test //tests:net_parser_test //tests:data_test //tests:image_test //tests:loader_test
            //tests:trainer_test //tests:fuzz_test)
if [[ "${1:-}" == "--targets" ]]; then
  printf '%s\n' "${ci_targets[@]}"
  exit 0
fi
if [[ "${1:-}" == "--no-setup" ]]; then
  shift
else
  bash tools/setup.sh || exit 1
fi
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=("${ci_targets[@]}")
fi
# Bazel runs two tests at a time on two cores: one OpenMP thread each keeps the
# slower sanitized binaries from oversubscribing them.
exec bazel test --config=asan --test_env=OMP_NUM_THREADS=1 --test_output=errors "${targets[@]}"

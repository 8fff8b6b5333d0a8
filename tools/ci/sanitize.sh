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
            //tests:trainer_test //tests:fuzz_test //tests:recurrent_test //tests:text_dataset_test)
if [[ "${1:-}" == "--targets" ]]; then
  printf '%s\n' "${ci_targets[@]}"
  exit 0
fi
if [[ "${1:-}" == "--no-setup" ]]; then
  shift
else
  bash tools/setup.sh || exit 1
fi
# Bazel runs two tests at a time on two cores: one OpenMP thread each keeps the
# slower sanitized binaries from oversubscribing them.
asan=(bazel test --config=asan --test_env=OMP_NUM_THREADS=1 --test_output=errors)
if [[ $# -gt 0 ]]; then
  exec "${asan[@]}" "$@"
fi
# memory_test's equivalence product takes most of an hour sanitized: the CI
# set runs every variant on the residual network (forks and joins), the
# best-fit variant on every network, and the liveness, out-of-memory and
# page-chunk tests - all but the default variant, whose learned planner
# trains anew at every budget its minimum search probes (7 minutes
# sanitized; unsanitized it runs in the suite).
memory_filter='Networks/VariantTest.*/resnet_*:Networks/VariantTest.*_best_fit'
memory_filter+=':LivenessTest.*:OutOfMemoryTest.*:VaChunkTest.*'
memory_filter+='-Networks/VariantTest.*/resnet_first_fit'
"${asan[@]}" "${ci_targets[@]:1}"
status=$?
"${asan[@]}" --test_filter="$memory_filter" //tests:memory_test || status=1
exit $status

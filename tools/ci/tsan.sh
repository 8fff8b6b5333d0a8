#!/usr/bin/env bash
# Runs the copy engine, the residency state machine and the memory runtime's
# tests under ThreadSanitizer (bazel --config=tsan). OpenMP runs on one
# thread there: libgomp is not instrumented and would only add noise.
#
#   bash tools/ci/tsan.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup.sh
export OMP_NUM_THREADS=1
suppressions="$(pwd)/tools/ci/tsan_suppressions.txt"
bazel test --config=tsan --test_env=OMP_NUM_THREADS=1 \
  --test_env=TSAN_OPTIONS="halt_on_error=1 suppressions=$suppressions" \
  --test_output=errors //tests:copy_engine_test //tests:memory_test //tests:data_test //tests:loader_test

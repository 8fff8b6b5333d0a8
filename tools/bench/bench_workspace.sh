#!/usr/bin/env bash
# The speed bought with memory: training images/s of a ResNet and of VGG-16
# under a roomy device budget and under the smallest budget each runs in,
# with the dynamic workspace policy (the runtime gives convolutions whatever
# workspace is left) and, for comparison, a fixed 8 MiB cap.
#
#   bash tools/bench/bench_workspace.sh [--steps N]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=5
if [[ "${1:-}" == "--steps" ]]; then steps=$2; fi
bash tools/setup.sh
bazel build //tools/bench:bench_train >/dev/null 2>&1 || bazel build //tools/bench:bench_train
bin=$(bazel info bazel-bin 2>/dev/null)/tools/bench/bench_train
run() {
  "$bin" --steps "$steps" --warmup 2 "$@" | sed -E 's/^spill //'
}
for net in "models/resnet18.yaml --set stem=cifar --set size=32 --set classes=10 --batch 64" \
           "models/vgg16.yaml --set size=32 --set classes=10 --batch 32"; do
  # shellcheck disable=SC2086
  run --config $net --memory liveness --device-memory 8GiB --workspace dynamic
  # shellcheck disable=SC2086
  run --config $net --memory liveness --device-memory 8GiB --workspace cap:8MiB
  # shellcheck disable=SC2086
  run --config $net --memory liveness --minimum --workspace dynamic
  # shellcheck disable=SC2086
  run --config $net --memory superneurons --minimum --workspace dynamic
done

#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains. With no
# arguments it trains the built-in default (a small CNN on Fashion-MNIST,
# installed by tools/setup.sh); any arguments go to `train`:
#
#   bash tools/train.sh
#   bash tools/train.sh --config configs/resnet18_fashion.yaml
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
bazel build //tools:train //tools:plan >/tmp/spill-build.log 2>&1 || {
  cat /tmp/spill-build.log >&2
  exit 1
}
exec "$(bazel info bazel-bin 2>/dev/null)/tools/train" "$@"

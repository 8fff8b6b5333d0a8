#!/usr/bin/env bash
# Trains ResNet-18 (CIFAR stem, 32x32, 10 classes) at batch 64 in spill and in
# PyTorch on this machine, both with 2 threads, and prints images/s of each
# and the ratio. PyTorch comes from Debian (tools/setup.sh --bench).
#
#   bash tools/bench/bench_resnet18.sh [--steps N]
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=20
if [[ "${1:-}" == "--steps" ]]; then steps=$2; fi
bash tools/setup.sh --bench
bazel build -c opt //tools/bench:bench_train >/dev/null 2>&1 || bazel build -c opt //tools/bench:bench_train
bin=$(bazel info -c opt bazel-bin 2>/dev/null)/tools/bench/bench_train
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=2
ours=$("$bin" --config models/resnet18.yaml --set stem=cifar --set size=32 --set classes=10 \
         --batch 64 --steps "$steps" --export "$dir")
echo "$ours"
theirs=$(/usr/bin/python3 tools/bench/bench_torch.py "$dir" --steps "$steps" --threads 2)
echo "$theirs"
a=$(echo "$ours" | sed -E 's/.*: ([0-9.]+) images\/s.*/\1/')
b=$(echo "$theirs" | sed -E 's/.*: ([0-9.]+) images\/s.*/\1/')
echo "ratio spill / pytorch: $(/usr/bin/python3 -c "print(f'{$a / $b:.2f}')")"

#!/usr/bin/env bash
# ResNet-18 (CIFAR stem, 32x32, 10 classes, batch 64) in spill against
# PyTorch: three runs in a row from an empty timing cache, each ratio
# printed (tools/bench/bench_vs_pytorch.sh says how).
#
#   bash tools/bench/bench_resnet18.sh [--runs N] [--steps N] [-- BENCH_TRAIN_FLAGS]
exec bash "$(dirname "$0")/bench_vs_pytorch.sh" resnet18 "$@"

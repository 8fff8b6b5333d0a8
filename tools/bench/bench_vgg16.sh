#!/usr/bin/env bash
# VGG-16 (32x32, 10 classes, batch 32) in spill against PyTorch: three runs
# in a row from an empty timing cache, each ratio printed
# (tools/bench/bench_vs_pytorch.sh says how).
#
#   bash tools/bench/bench_vgg16.sh [--runs N] [--steps N] [-- BENCH_TRAIN_FLAGS]
exec bash "$(dirname "$0")/bench_vs_pytorch.sh" vgg16 "$@"

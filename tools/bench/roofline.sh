#!/usr/bin/env bash
# The roofline of CPU training on this machine, measured:
#   1. its float32 FMA peak (registers only, one thread per core) and memory
#      bandwidth (bench_roofline);
#   2. what each layer type of the network achieves against them, from
#      spill's per-layer profile (bench_train --profile): GFLOP/s as a
#      fraction of the peak, GB/s as a fraction of the bandwidth;
#   3. the fraction of the peak each framework's whole training step reaches:
#      images/s x the network's training FLOP per image, for spill and for
#      PyTorch (bench_torch.py).
# Prints a markdown table. Meaningful on a quiet machine only: the load
# average is printed with it.
#
#   bash tools/bench/roofline.sh [resnet18|vgg16] [--steps N]
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-resnet18}
steps=10
if [[ "${2:-}" == "--steps" ]]; then steps=$3; fi
case "$model" in
  resnet18) net=(--config models/resnet18.yaml --set stem=cifar --set size=32 --set classes=10
                 --batch 64) ;;
  vgg16) net=(--config models/vgg16.yaml --set size=32 --set classes=10 --batch 32) ;;
  *) echo "usage: roofline.sh [resnet18|vgg16] [--steps N]" >&2; exit 2 ;;
esac
bash tools/setup.sh --bench
# The configuration tools/test.sh builds, so its outputs are reused.
config=()
[[ -x /usr/local/cuda/bin/nvcc ]] && config=(--config=cuda)
bazel build "${config[@]}" //tools/bench:bench_train //tools/bench:bench_roofline \
  >/tmp/spill-bench-build.log 2>&1 || { cat /tmp/spill-bench-build.log >&2; exit 1; }
bin=$(bazel info "${config[@]}" bazel-bin 2>/dev/null)/tools/bench
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(nproc)}
cut -d' ' -f1-3 /proc/loadavg >"$dir/load"
"$bin/bench_roofline" | tee "$dir/roofline"
"$bin/bench_train" "${net[@]}" --steps 0 --export "$dir/net"
# Convolution timings come from the user's cache (measured here if empty,
# before the timed steps).
"$bin/bench_train" "${net[@]}" --steps "$steps" --profile | tee "$dir/spill"
/usr/bin/python3 tools/bench/bench_torch.py "$dir/net" --steps "$steps" \
  --threads "$OMP_NUM_THREADS" | tee "$dir/pytorch"
/usr/bin/python3 tools/bench/roofline_table.py "$dir" "$model"

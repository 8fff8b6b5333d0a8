#!/usr/bin/env bash
# Training throughput of spill against PyTorch on the same network, weights,
# batch and solver (SGD, momentum 0.9, weight decay 5e-4), both with one
# thread per core, PyTorch 1.13 from Debian (tools/setup.sh --bench).
#
# The runs alternate - spill, PyTorch, spill, PyTorch, ... - so that both see
# the same machine, and the ratio is taken within each pair. spill starts
# from an empty convolution timing cache (a fresh one in a temporary folder;
# the user's own is not touched): its first run times the convolution
# algorithms before its timed steps, the later runs read the times back, as
# a new user's first and later runs would. Each line gives the load average
# before the pair: a busy machine slows both, but not always alike, so the
# figures are only meaningful on a quiet machine (load well below the
# cores). Besides images/s, both report the CPU seconds (all threads) their
# timed steps took, which other work on the machine disturbs much less.
#
#   bash tools/bench/bench_vs_pytorch.sh resnet18 [--runs 3] [--steps 20] [--threads N]
#                                        [--precision bf16]
#       (bf16: spill's activations in bfloat16 against PyTorch's forward pass
#       under torch.autocast in bfloat16)
#   bash tools/bench/bench_vs_pytorch.sh vgg16
#   bash tools/bench/bench_vs_pytorch.sh char_lstm
#   bash tools/bench/bench_vs_pytorch.sh resnet18 -- --plain-layouts --workspace pin:dnnl
#       (anything after -- goes to spill's bench_train: here, spill without
#       blocked layouts or Winograd convolutions)
#
# resnet18: ResNet-18 with the CIFAR stem, 32x32, 10 classes, batch 64.
# vgg16:    VGG-16, 32x32, 10 classes, batch 32 (dropout in both).
# char_lstm: the character LSTM (2 x 256 units, 64 steps, 114 symbols), batch 64.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-}
shift || true
runs=3 steps=20 threads=$(nproc) precision=fp32 extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --runs) runs=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --precision) precision=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench_vs_pytorch: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$model" in
  resnet18) net=(--config models/resnet18.yaml --set stem=cifar --set size=32 --set classes=10
                 --batch 64) ;;
  vgg16) net=(--config models/vgg16.yaml --set size=32 --set classes=10 --batch 32) ;;
  char_lstm) net=(--config models/char_lstm.yaml --set classes=114 --batch 64) ;;
  *) echo "usage: bench_vs_pytorch.sh resnet18|vgg16|char_lstm [--runs N] [--steps N] [--threads N] [-- FLAGS]" >&2
     exit 2 ;;
esac

bash tools/setup.sh --bench
# The configuration tools/test.sh builds, so its outputs are reused.
config=()
[[ -x /usr/local/cuda/bin/nvcc ]] && config=(--config=cuda)
bazel build "${config[@]}" //tools/bench:bench_train >/tmp/spill-bench-build.log 2>&1 || {
  cat /tmp/spill-bench-build.log >&2
  exit 1
}
bin=$(bazel info "${config[@]}" bazel-bin 2>/dev/null)/tools/bench/bench_train
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export XDG_CACHE_HOME=$dir/cache OMP_NUM_THREADS=$threads
mkdir -p "$XDG_CACHE_HOME"

# The network and its initial weights for PyTorch.
"$bin" "${net[@]}" --steps 0 --export "$dir/net" "${extra[@]}"

field() {  # $1: a line of either benchmark; $2: images/s or cpu-s
  case "$2" in
    images) sed -E 's/.*: ([0-9.]+) images\/s.*/\1/' <<<"$1" ;;
    cpu) sed -E 's/.* ([0-9.]+) cpu-s.*/\1/' <<<"$1" ;;
  esac
}
echo "$model ($precision): spill against PyTorch, $threads threads, $steps timed steps per run, $(nproc) cores"
ratios=()
for run in $(seq 1 "$runs"); do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  ours=$("$bin" "${net[@]}" --steps "$steps" --precision "$precision" "${extra[@]}")
  theirs=$(/usr/bin/python3 tools/bench/bench_torch.py "$dir/net" --steps "$steps" \
             --threads "$threads" --autocast "$([[ $precision == bf16 ]] && echo bf16 || echo off)")
  a=$(field "$ours" images) b=$(field "$theirs" images)
  ca=$(field "$ours" cpu) cb=$(field "$theirs" cpu)
  ratio=$(/usr/bin/python3 -c "print(f'{$a / $b:.2f}')")
  cpu_ratio=$(/usr/bin/python3 -c "print(f'{$cb / $ca:.2f}')")
  ratios+=("$ratio")
  echo "run $run (load average $load before it):"
  echo "  $ours"
  echo "  $theirs"
  echo "  ratio spill / pytorch: $ratio in images/s, $cpu_ratio in CPU seconds per step"
done
echo "$model ratios (images/s, spill / pytorch): ${ratios[*]}"

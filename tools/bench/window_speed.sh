#!/usr/bin/env bash
# Simulated training speed of ResNet-50 (224x224, SGD with momentum) under
# the window scheduler in a 16 GiB budget on the v100-nvlink2 profile - the
# window paper's Table 1 setting - from plans replayed by the timeline
# simulator (memory/sim). Nothing here runs on a GPU: every number is a
# simulation under the profile's spec-sheet rates and modelled step costs.
#
# Prints three Markdown tables:
#   1. images/s per batch of the paper's Table 1: in-core (liveness), window
#      + best fit without compaction (the largest scheduler budget that fits,
#      from 1x down by 0.05x), window + va with 40 MiB chunks, each also as a
#      share of in-core at batch 190;
#   2. window + va at batch 1440 against the host cost of mapping a chunk
#      (--map-us; the wait for the compute before an unmap is always charged);
#   3. the window size swept at batch 928.
#
#   bash tools/bench/window_speed.sh
set -euo pipefail
cd "$(dirname "$0")/../.."

config=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  config=(--config=cuda)  # the build tools/test.sh makes: nothing to rebuild
fi
bazel build "${config[@]}" //tools:plan >/dev/null 2>&1 || bazel build "${config[@]}" //tools:plan

readonly batches=(64 128 190 256 512 928 1120 1248 1440)
readonly reference_batch=190  # the paper's largest in-core batch

plan() {
  bazel-bin/tools/plan --config configs/resnet50_imagenet.yaml --device-memory 16GiB \
    --host-memory 512GiB --device-profile v100-nvlink2 "$@"
}

# images/s from plan's "predicted on ..." line; empty when the plan does not fit.
images_per_second() {
  awk '/predicted on/ { for (i = 2; i <= NF; i++) if ($i == "images/s,") {
         v = $(i - 1); gsub(/[(]/, "", v); print v } }'
}

# The largest window scheduler budget (1x, 0.95x, ...) at which best fit
# without compaction fits batch $1: "FACTOR IMAGES_PER_SECOND", or nothing.
best_fit_window() {
  local f ips
  for f in 1.00 0.95 0.90 0.85 0.80 0.75 0.70 0.65 0.60 0.55 0.50 0.45 0.40 0.35 0.30; do
    ips=$(plan --batch "$1" --memory window --allocator best_fit --compact false \
      --window-budget "${f}x" | images_per_second)
    if [[ -n "$ips" ]]; then
      echo "$f $ips"
      return
    fi
  done
}

share() {  # $1 images/s as a percentage of $2
  awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f%%", 100 * a / b }'
}

cell() {  # "IPS (SHARE)" or x when it does not fit
  if [[ -z "$1" ]]; then echo "x"; else echo "$1 ($(share "$1" "$2"))"; fi
}

reference=$(plan --batch "$reference_batch" --memory liveness | images_per_second)

echo "| batch | in-core (liveness) | window + best fit, no compaction (budget) | window + va, 40 MiB |"
echo "|---:|---:|---:|---:|"
for b in "${batches[@]}"; do
  incore=$(plan --batch "$b" --memory liveness | images_per_second)
  read -r factor best <<<"$(best_fit_window "$b")" || true
  va=$(plan --batch "$b" --memory window --allocator va --va-chunk 40MiB | images_per_second)
  best_cell=$(cell "${best:-}" "$reference")
  [[ -n "${best:-}" ]] && best_cell="$best_cell, ${factor}x"
  echo "| $b | $(cell "$incore" "$reference") | $best_cell | $(cell "$va" "$reference") |"
  factor="" best=""
done

echo
echo "| chunk | map + unmap cost per chunk | images/s at b1440 (share of in-core b$reference_batch) |"
echo "|---|---:|---:|"
for chunk in 40MiB 2MiB; do
  for us in 0 10 100 1000; do
    ips=$(plan --batch 1440 --memory window --allocator va --va-chunk "$chunk" --map-us "$us" |
      images_per_second)
    echo "| $chunk | $us µs | $(cell "$ips" "$reference") |"
  done
done

echo
echo "| window (x budget) | window + va, 40 MiB, b928 | window + best fit at 0.70x, b928 |"
echo "|---:|---:|---:|"
for w in 1.0x 1.25x 1.5x 2x 3x; do
  va=$(plan --batch 928 --memory window --allocator va --va-chunk 40MiB --window "$w" |
    images_per_second)
  best=$(plan --batch 928 --memory window --allocator best_fit --compact false \
    --window-budget 0.70x --window "$w" | images_per_second)
  echo "| $w | $(cell "$va" "$reference") | $(cell "$best" "$reference") |"
done

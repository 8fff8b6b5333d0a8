#!/usr/bin/env bash
# The largest-batch table of tools/bench/RESULTS.md ("Streamed steps"): the
# largest batch of each network under a 12 GiB device budget, superneurons,
# unsliced and with batch slices, with a 64 GiB and a 256 GiB host pool,
# under the default workspace policy and, in parentheses where it differs,
# under memory_optimal. Planned from shapes (widest), nothing is reserved.
#
#   bazel build //tools:widest
#   bash tools/bench/largest_batch.sh            # all six networks
#   bash tools/bench/largest_batch.sh vgg16      # some
set -euo pipefail
cd "$(dirname "$0")/../.."
widest=bazel-bin/tools/widest
[[ -x $widest ]] || { echo "largest_batch: build it first: bazel build //tools:widest" >&2; exit 1; }
nets=("$@")
[[ ${#nets[@]} -gt 0 ]] || nets=(alexnet vgg16 inception_v4 resnet50 resnet101 resnet152)

largest() {  # network chunk host workspace
  "$widest" --config "models/$1.yaml" --device-memory 12GiB --host-memory "$3" \
      --memory superneurons --chunk "$2" --workspace "$4" |
    sed -n 's/^largest batch of .*: \([0-9]*\); peak.*/\1/p'
}

echo "| network | off, 64 GiB host | auto, 64 GiB host | off, 256 GiB | auto, 256 GiB |"
echo "|---|---:|---:|---:|---:|"
for net in "${nets[@]}"; do
  row="| $net"
  for cell in "off 64GiB" "auto 64GiB" "off 256GiB" "auto 256GiB"; do
    read -r chunk host <<<"$cell"
    default=$(largest "$net" "$chunk" "$host" dynamic)
    optimal=$(largest "$net" "$chunk" "$host" memory_optimal)
    if [[ $default == "$optimal" ]]; then
      row+=" | $default"
    else
      row+=" | $default ($optimal)"
    fi
  done
  echo "$row |"
done

#!/usr/bin/env bash
# The memory page at scale (memory/report/README.md): plans the 2,500-unit
# ResNet (superneurons, batch 32, 224x224), writes its page, and opens it
# RUNS times (default 5) in headless Chromium with #bench, which makes the
# page time itself. Prints the page's size, and per run: when the first view
# was drawn (ms since the navigation began: reading, parsing and decoding
# the data, drawing the curve and the address space), and the mean and
# slowest redraw while panning and zooming. A loaded machine slows every
# figure; the load average is printed beside them.
#
#   bash tools/bench/memory_page.sh [RUNS] [PLAN FLAGS]
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-5}
shift || true
bash tools/setup.sh
# The configuration tools/test.sh builds, so its outputs are reused.
config=()
[[ -x /usr/local/cuda/bin/nvcc ]] && config=(--config=cuda)
bazel build "${config[@]}" //tools:plan >/dev/null 2>&1 || bazel build "${config[@]}" //tools:plan
plan=$(bazel info "${config[@]}" bazel-bin 2>/dev/null)/tools/plan
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
page=$out/resnet_2500_units.html
start=$(date +%s%N)
"$plan" --config models/resnet_deep.yaml --set n1=6 --set n2=32 --set n3=2456 --set n4=6 \
  --memory superneurons --html "$page" "$@" >/dev/null
echo "planned and written in $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo "page: $(stat -c %s "$page") bytes"
for ((i = 1; i <= runs; i++)); do
  load=$(cut -d' ' -f1 /proc/loadavg)
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$out/profile$i" --window-size=1400,1000 --dump-dom "file://$page#bench" \
    2>/dev/null | grep -o '<body[^>]*>' |
    sed -E 's/.*data-render-ms="([0-9]+)".*data-pan-ms="([0-9.]+)" data-pan-max-ms="([0-9.]+)" data-zoom-ms="([0-9.]+)".*/\1 \2 \3 \4/' |
    awk -v load="$load" '{ printf "run: first view drawn at %s ms; pan %s ms per redraw (slowest %s); zoom out %s ms; load average %s\n", $1, $2, $3, $4, load }'
done

#!/usr/bin/env bash
# Stochastic depth under a memory budget: ResNet-110 with stochastic depth
# (models/resnet110_sd.yaml, p_last = 0.5) on Fashion-MNIST trained for N
# iterations twice, from the same seed, so both runs draw the same drop
# pattern in every iteration:
#   1. without memory policies (memory mode baseline: every tensor its own
#      block for the whole iteration) in a roomy budget;
#   2. under MODE at the smallest budget `plan --minimum` reports for it
#      (the CPU device's memory is a fixed arena of that size: an iteration
#      that needed more would stop the run).
# Both pin one convolution algorithm (oneDNN's), as bit-identity asks: the
# dynamic workspace policy picks algorithms by the memory free, and those
# round differently.
# Prints the budget, each run's peak and time, the branches dropped, and
# whether the losses of every iteration are bit-identical.
#
#   bash tools/bench/stochastic_depth.sh [--iterations 1000] [--batch 16] [--mode superneurons]
set -euo pipefail
cd "$(dirname "$0")/../.."

iterations=1000
batch=16
mode=superneurons
while [[ $# -gt 0 ]]; do
  case "$1" in
    --iterations) iterations="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --mode) mode="$2"; shift 2 ;;
    *) echo "usage: $0 [--iterations N] [--batch N] [--mode MODE]" >&2; exit 2 ;;
  esac
done

config=()
if [[ -x /usr/local/cuda/bin/nvcc ]]; then
  config=(--config=cuda)  # the build tools/test.sh makes: nothing to rebuild
fi
bazel build "${config[@]}" //tools:plan //tools:train >/dev/null 2>&1 ||
  bazel build "${config[@]}" //tools:plan //tools:train
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cp bazel-bin/tools/plan bazel-bin/tools/train "$bin/"

# The training config at this batch, its model path made absolute.
sed -e "s|  batch: .*|  batch: $batch|" \
  -e "s|file: \.\./models/|file: $PWD/models/|" configs/resnet110_sd_fashion.yaml >"$bin/sd.yaml"

readonly pin=(--workspace pin:dnnl)
budget=$("$bin/plan" --config "$bin/sd.yaml" --memory "$mode" "${pin[@]}" --minimum --json |
  python3 -c 'import json, sys; print(json.load(sys.stdin)["modes"][0]["minimum_budget_bytes"])')

train() {  # $1 name, then train's flags
  local name="$1"
  shift
  local start=$SECONDS
  "$bin/train" --config "$bin/sd.yaml" --max-steps "$iterations" --output "$bin/$name" \
    --report "$bin/$name.json" "${pin[@]}" "$@" >"$bin/$name.out" 2>&1 || {
    tail -5 "$bin/$name.out" >&2
    echo "$name: the run stopped" >&2
    exit 1
  }
  echo $((SECONDS - start)) >"$bin/$name.seconds"
}
train baseline --memory baseline --device-memory 16GiB
train "$mode" --memory "$mode" --device-memory "$budget"

python3 - "$bin" "$mode" "$budget" "$iterations" "$batch" <<'EOF'
import json, sys
bin, mode, budget, iterations, batch = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
def steps(name):
    return [json.loads(l) for l in open(f"{bin}/{name}/log.jsonl") if '"kind":"train"' in l]
def report(name):
    return json.load(open(f"{bin}/{name}.json"))
def seconds(name):
    return int(open(f"{bin}/{name}.seconds").read())
base, run = steps("baseline"), steps(mode)
same = sum(a["loss"] == b["loss"] and a["dropped"] == b["dropped"] for a, b in zip(base, run))
mib = 1 << 20
print(f"ResNet-110 with stochastic depth (p_last 0.5), Fashion-MNIST, batch {batch}, {iterations} iterations")
print(f"smallest budget plan reports for {mode}: {budget / mib:.2f} MiB")
for name in ("baseline", mode):
    r = report(name)
    print(f"  {name:<14} peak {r['peak_device_memory_bytes'] / mib:8.2f} MiB, "
          f"{r['steps']} iterations in {seconds(name)} s (evaluation included), "
          f"{r['dropped_branches']} branches dropped, {r['skipped_computations']} layer computations skipped")
peak = report(mode)["peak_device_memory_bytes"]
if peak > budget:
    print(f"  {mode}'s peak {peak} B passed the budget {budget} B")
    sys.exit(1)
dropped = [s["dropped"] for s in run]
print(f"  {mode} ran {len(run)} of {iterations} iterations within {budget / mib:.2f} MiB "
      f"(drops per iteration: min {min(dropped)}, mean {sum(dropped) / len(dropped):.2f}, max {max(dropped)})")
print(f"  iterations with bit-identical losses and drop counts: {same} of {len(base)}")
sys.exit(0 if same == len(base) == len(run) == iterations else 1)
EOF

#!/usr/bin/env bash
# Checks spill on a GPU machine, from the repository root, with the bundle
# that tools/ci/gpu_bundle.sh made (.carry/gpu/). The work comes in parts, each
# made to fit one call of ten minutes on a lent machine:
#
#   tests     the CUDA layer and runtime tests, with SPILL_REQUIRE_GPU=1 so
#             that a test which cannot use the GPU fails instead of skipping
#   sanitize  compute-sanitizer memcheck: first a planted overrun between two
#             tensors of the pool, which it must report (proof that the pool
#             annotations reach it), then a few training steps of a small
#             ResNet in the tightest memory mode, which must be clean
#   bench     ResNet-50 at 224x224, batch 64, in three memory modes, against
#             PyTorch with the same network and weights (TF32 off and on)
#   scale     the paper's experiments on a 12 GiB budget: the widest batch
#             and the deepest ResNet, planned, then trained for two steps
#
#   bash tools/ci/gpu_check.sh PART...      # there: run these parts in order
#   bash tools/ci/gpu_check.sh all          # every part (over ten minutes)
#   bash tools/ci/gpu_check.sh --dry-run    # here: the device calls to make
#
# Each part stops itself after kPartSeconds (well inside the call's ten
# minutes) and each of its steps has its own time limit, so a hang costs a
# step, not the call. A step's output goes to a log of its own (never through
# a pipe, so no exit status is lost); the part's summary - machine,
# libraries, one line per step with its status and time - goes to
# PART.summary. Both land in $OUT when it is set (the files a lent machine
# sends back: at most 8 per call, which every part respects), else in
# gpu_results/. The exit status is non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

bundle=.carry/gpu
results=${OUT:-gpu_results}
kPartSeconds=540     # each part's own deadline, inside one 600 s device call
kCallSeconds=600     # the device call's limit (timeout_s)
parts=(tests sanitize bench scale)
declare -A about=(
  [tests]="CUDA layer and runtime tests, SPILL_REQUIRE_GPU=1"
  [sanitize]="compute-sanitizer memcheck: a planted pool overrun, then a clean training run"
  [bench]="ResNet-50 speed in three memory modes against PyTorch (TF32 off and on)"
  [scale]="widest batch and deepest ResNet under 12 GiB, each confirmed by two steps"
)
# Estimates, not measurements: no GPU has run these yet. From the CPU runs of
# the same work and the H100's speed; the step limits bound them either way.
declare -A expected=([tests]=180 [sanitize]=300 [bench]=240 [scale]=330)

dry_run=""
outer_library_path=${LD_LIBRARY_PATH:-}
failed=0
deadline=0
part=""

usage() {
  echo "usage: bash tools/ci/gpu_check.sh PART... | all | --dry-run   (parts: ${parts[*]})" >&2
  exit 2
}

record() {  # record LINE: one line of the part's summary, also shown
  echo "$1" | tee -a "$results/$part.summary"
}

# run_step NAME LIMIT_S COMMAND...: runs COMMAND under a time limit (cut to
# what is left of the part), its output in PART.NAME.log; sets step_rc
# (124: out of time) and step_seconds.
run_step() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS))
  if ((left < 15)); then
    step_rc=124
    step_seconds=0
    return
  fi
  ((limit > left)) && limit=$left
  local log="$results/$part.$name.log" start=$SECONDS
  echo "--- $name (limit $limit s): $*" | tee "$log"
  timeout --kill-after=15 "$limit" "$@" >>"$log" 2>&1
  step_rc=$?
  step_seconds=$((SECONDS - start))
  tail -n 20 "$log"
  ((step_rc == 137)) && step_rc=124
}

# step NAME LIMIT_S COMMAND...: a step that must succeed.
step() {
  local name=$1 limit=$2
  shift 2
  if [[ -n $dry_run ]]; then
    printf '       %-22s limit %3d s: %s\n' "$name" "$limit" "$*"
    return 0
  fi
  run_step "$name" "$limit" "$@"
  local status=ok
  if ((step_rc == 124)); then
    status="FAILED: no result within its limit"
  elif ((step_rc != 0)); then
    status="FAILED: exit $step_rc"
  fi
  [[ $status == ok ]] || failed=1
  record "$(printf '%-22s %-36s %4d s' "$name" "$status" "$step_seconds")"
}

# expect_report NAME LIMIT_S PATTERN COMMAND...: a step that must fail with
# PATTERN in its output (a planted error that a checker has to find).
expect_report() {
  local name=$1 limit=$2 pattern=$3
  shift 3
  if [[ -n $dry_run ]]; then
    printf '       %-22s limit %3d s: %s\n%33s(must fail, reporting "%s")\n' "$name" "$limit" \
      "$*" "" "$pattern"
    return 0
  fi
  run_step "$name" "$limit" "$@"
  local status
  if ((step_rc == 124)); then
    status="FAILED: no result within its limit"
  elif ((step_rc == 0)); then
    status="FAILED: the planted error went unreported"
  elif grep -q "$pattern" "$results/$part.$name.log"; then
    status="ok: reported as planted"
  else
    status="FAILED: exit $step_rc without \"$pattern\""
  fi
  [[ $status == ok* ]] || failed=1
  record "$(printf '%-22s %-36s %4d s' "$name" "$status" "$step_seconds")"
}

part_tests() {
  for t in cuda_layers_test cuda_runtime_test; do
    local limit=240
    [[ $t == cuda_runtime_test ]] && limit=290
    step "$t" "$limit" env SPILL_REQUIRE_GPU=1 "$bundle/bin/$t" \
      "--gtest_output=xml:$results/tests.$t.xml"
  done
}

part_sanitize() {
  local sanitizer=compute-sanitizer
  if [[ -z $dry_run ]] && ! command -v compute-sanitizer >/dev/null; then
    sanitizer=/usr/local/cuda/bin/compute-sanitizer
  fi
  local memcheck=("$sanitizer" --tool memcheck --nvtx yes --error-exitcode 3)
  expect_report planted_overrun 150 "Invalid __global__ write" \
    env SPILL_CUDA_MEMCHECK=1 SPILL_MEMCHECK_PLANT=1 "${memcheck[@]}" \
    "$bundle/bin/cuda_runtime_test" --gtest_filter=CudaMemcheckTest.PoolAnnotationsBoundEachTensor
  # Every kernel and copy of a few steps in the tightest mode, with the
  # pool's blocks annotated: out-of-bounds, misaligned, between tensors.
  step memcheck_training 380 env SPILL_CUDA_MEMCHECK=1 "${memcheck[@]}" \
    "$bundle/bin/bench_train" --config models/resnet18.yaml --set stem=cifar --set size=32 \
    --set classes=10 --device cuda --memory superneurons --minimum --batch 32 --steps 2 --warmup 1
}

part_bench() {
  # The same network and initial weights for both frameworks.
  local export=/tmp/spill_resnet50_export
  for mode in baseline liveness superneurons; do
    step "resnet50_$mode" 110 "$bundle/bin/bench_train" --config models/resnet50.yaml \
      --device cuda --device-memory 40GiB --memory "$mode" --batch 64 --steps 20 --export "$export"
  done
  step resnet50_pytorch 150 env PYTHONUNBUFFERED=1 python3 tools/bench/bench_torch.py "$export" \
    --steps 20 --device cuda --tf32 both
}

part_scale() {
  step widest_liveness 90 "$bundle/bin/widest" --config models/resnet50.yaml --device cuda \
    --device-memory 12GiB --memory liveness --confirm 2
  step widest_superneurons 120 "$bundle/bin/widest" --config models/resnet50.yaml --device cuda \
    --device-memory 12GiB --memory superneurons --confirm 2
  step deepest_liveness 100 "$bundle/bin/deepest" --device cuda --device-memory 12GiB --batch 16 \
    --memory liveness --confirm 2
  step deepest_superneurons 220 "$bundle/bin/deepest" --device cuda --device-memory 12GiB \
    --batch 16 --memory superneurons --confirm 2
}

# The machine and the libraries, at the head of each summary. Fails when a
# binary of the bundle would not load.
preamble() {
  source tools/ci/gpu_env.sh
  LD_LIBRARY_PATH=$(LD_LIBRARY_PATH=$outer_library_path spill_cuda_library_path "$bundle")
  export LD_LIBRARY_PATH
  record "part $part: ${about[$part]}"
  local gpu="no nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)
  fi
  record "machine: $gpu"
  record "library path: $LD_LIBRARY_PATH"
  local report
  report=$(spill_check_libraries "$bundle"/bin/*)
  local rc=$?
  record "$report"
  if ((rc != 0)); then
    record "part $part: FAILED: the bundle's binaries cannot load their libraries"
    return 1
  fi
}

dry_run_report() {
  dry_run=1
  results='$OUT'
  echo "Device calls for one GPU session, in this order; each one is its own call of the"
  echo "device tool, with the bundle carried in (no Bazel there):"
  echo
  if [[ -d $bundle/bin ]]; then
    echo "  bundle: $bundle, $(du -sh "$bundle" | cut -f1), built $(date -r "$bundle/bin" '+%F %R')"
  else
    echo "  bundle: $bundle is missing; make it first: bash tools/ci/gpu_bundle.sh"
  fi
  echo
  local total=0 n=1 p
  for p in "${parts[@]}"; do
    echo "  $n. $p: ${about[$p]}"
    echo "     run(command=\"bash tools/ci/gpu_check.sh $p\", carry=[\"$bundle\"], timeout_s=$kCallSeconds)"
    echo "     expected about $((expected[$p] / 60)) min $((expected[$p] % 60)) s (an estimate);" \
      "the part stops itself at $kPartSeconds s"
    "part_$p"
    total=$((total + expected[$p]))
    n=$((n + 1))
    echo
  done
  echo "  expected in all: about $((total / 60)) min of device time, plus a minute or two to start"
  echo "  the machine; results come back as PART.summary and one log per step."
}

run_part() {
  part=$1
  failed=0
  mkdir -p "$results"
  : >"$results/$part.summary"
  deadline=$((SECONDS + kPartSeconds))
  local start=$SECONDS
  if preamble; then
    "part_$part"
  else
    failed=1
  fi
  if ((failed)); then
    record "part $part: FAILED in $((SECONDS - start)) s"
  else
    record "part $part: ok in $((SECONDS - start)) s"
  fi
}

[[ $# -gt 0 ]] || usage
if [[ $1 == --dry-run ]]; then
  dry_run_report
  exit 0
fi
selected=()
for arg in "$@"; do
  if [[ $arg == all ]]; then
    selected+=("${parts[@]}")
  elif [[ -n ${about[$arg]+set} ]]; then
    selected+=("$arg")
  else
    usage
  fi
done
if [[ ! -d $bundle/bin ]]; then
  echo "gpu_check: no bundle at $bundle; build it with bash tools/ci/gpu_bundle.sh and carry it" >&2
  exit 2
fi
any_failed=0
for p in "${selected[@]}"; do
  run_part "$p"
  ((failed)) && any_failed=1
done
exit $any_failed

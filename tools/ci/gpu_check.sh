#!/usr/bin/env bash
# Checks spill on a GPU machine, from the repository root, with the bundle
# that tools/ci/gpu_bundle.sh made (.carry/gpu.tar.xz, unpacked here into
# .carry/gpu/ on first use). The work comes in parts, each made to fit one
# device call of eight minutes with room to spare:
#
#   tests          the CUDA layer and runtime tests, with SPILL_REQUIRE_GPU=1
#                  so that a test which cannot use the GPU fails instead of
#                  skipping: every layer against the CPU and over slices of
#                  the batch, every memory mode under every allocator,
#                  parameter placement and slicing (streamed steps)
#                  bit-identical to the baseline and run as planned
#   sanitize       compute-sanitizer memcheck: first a planted overrun between
#                  two tensors of the pool, which it must report (proof that
#                  the pool annotations reach it), then a few training steps
#                  of a small ResNet in the tightest memory mode, which must be
#                  clean (algorithm times estimated, not measured: timing every
#                  cuDNN algorithm under memcheck takes minutes)
#   bench          ResNet-50 at 224x224, batch 64, in three memory modes, each
#                  100 steps twice after a warm-up, against PyTorch with the
#                  same network and weights: TF32 off, TF32 on, and TF32 off
#                  with cudnn.deterministic=True (labelled rows)
#   scale_widest   the widest batch of ResNet-50 under a 12 GiB budget, planned,
#                  then trained for two steps, under two memory modes
#   scale_deepest  the deepest ResNet under 12 GiB at batch 16, likewise
#
#   bash tools/ci/gpu_check.sh PART...      # there: run these parts in order
#   bash tools/ci/gpu_check.sh all          # every part (far over one call)
#   bash tools/ci/gpu_check.sh --dry-run    # here: the device calls to make
#
# Each part stops itself after kPartSeconds and each of its steps has its
# own time limit, so a hang costs a step, not the call. A step's output goes
# to a log of its own (never through a pipe, so no exit status is lost); the
# part's summary - machine, libraries, one line per step with its status and
# time - goes to PART.summary, and its numbers (step results, images per
# second, batches and depths found, test counts) to PART.json. All of it
# lands in $OUT when it is set (the files a lent machine sends back: at most
# 8 per call, which every part respects), else in gpu_results/. The exit
# status is non-zero when any step failed. Where compute-sanitizer cannot
# watch the GPU (under gVisor it refuses the device), the sanitize part is
# SKIPPED, saying so - neither passed nor failed.
set -uo pipefail
cd "$(dirname "$0")/../.."

bundle=${SPILL_GPU_BUNDLE:-.carry/gpu}  # another place for the bundle (tests)
results=${OUT:-gpu_results}
kPartSeconds=420     # each part's own deadline: 7 minutes
kPartLimit=480       # what a part must fit, with its deadline's margin: 8 minutes
kCallSeconds=600     # the device call's limit (timeout_s)
parts=(tests sanitize bench scale_widest scale_deepest)
declare -A about=(
  [tests]="CUDA layer and runtime tests, SPILL_REQUIRE_GPU=1"
  [sanitize]="compute-sanitizer memcheck: a planted pool overrun, then a clean training run"
  [bench]="ResNet-50 speed in three memory modes against PyTorch (TF32 off, on, deterministic)"
  [scale_widest]="widest ResNet-50 batch under 12 GiB, confirmed by two steps"
  [scale_deepest]="deepest ResNet under 12 GiB, confirmed by two steps"
)
# Estimates, not measurements: no GPU has run these yet. From the CPU runs of
# the same work and the H100's speed; the step limits bound them either way.
declare -A expected=([tests]=300 [sanitize]=300 [bench]=330 [scale_widest]=240 [scale_deepest]=330)

# What compute-sanitizer says where it cannot watch the GPU.
kUnsupported="Device not supported"

dry_run=""
outer_library_path=${LD_LIBRARY_PATH:-}
failed=0
skipped=0
deadline=0
part=""
steps_json=()

usage() {
  echo "usage: bash tools/ci/gpu_check.sh PART... | all | --dry-run   (parts: ${parts[*]})" >&2
  exit 2
}

record() {  # record LINE: one line of the part's summary, also shown
  echo "$1" | tee -a "$results/$part.summary"
}

json_string() {  # json_string TEXT: TEXT as a JSON string
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\t'/ }
  s=${s//$'\r'/}
  printf '"%s"' "$s"
}

# numbers_of LOG: the numbers a step's log reports, as a JSON array of
# {"line", "value"}: images per second (bench), the batch or depth found
# (scale), the counts of a gtest XML report beside it (tests).
numbers_of() {
  local log=$1 line value first=1
  printf '['
  while IFS= read -r line; do
    value=$(echo "$line" | grep -oE '[0-9]+(\.[0-9]+)? images/s|: [0-9]+; peak|depth [0-9]+' |
      grep -oE '[0-9]+(\.[0-9]+)?' | head -1)
    [[ -z $value ]] && continue
    ((first)) || printf ', '
    first=0
    printf '{"line": %s, "value": %s}' "$(json_string "$line")" "$value"
  done < <(grep -E 'images/s|^largest batch of|^deepest ResNet' "$log" 2>/dev/null)
  printf ']'
}

tests_of() {  # tests_of XML: a gtest report's counts as JSON
  local xml=$1 head
  head=$(grep -m1 -oE '<testsuites [^>]*' "$xml" 2>/dev/null)
  local tests failures disabled skipped
  tests=$(echo "$head" | grep -oE ' tests="[0-9]+"' | grep -oE '[0-9]+')
  failures=$(echo "$head" | grep -oE ' failures="[0-9]+"' | grep -oE '[0-9]+')
  disabled=$(echo "$head" | grep -oE ' disabled="[0-9]+"' | grep -oE '[0-9]+')
  skipped=$(grep -c '<skipped' "$xml" 2>/dev/null)
  printf '{"tests": %s, "failures": %s, "disabled": %s, "skipped": %s}' "${tests:-null}" \
    "${failures:-null}" "${disabled:-null}" "${skipped:-0}"
}

# The part's numbers beside its logs: PART.json.
write_json() {
  local status=$1 machine=$2 seconds=$3 i
  {
    printf '{\n  "part": %s,\n  "status": %s,\n  "seconds": %s,\n  "machine": %s,\n' \
      "$(json_string "$part")" "$(json_string "$status")" "$seconds" "$(json_string "$machine")"
    printf '  "steps": [\n'
    for ((i = 0; i < ${#steps_json[@]}; ++i)); do
      printf '    %s%s\n' "${steps_json[$i]}" "$( ((i + 1 < ${#steps_json[@]})) && echo ,)"
    done
    printf '  ]\n}\n'
  } >"$results/$part.json"
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

# Notes a finished step: its summary line and its JSON entry.
note_step() {
  local name=$1 status=$2 log="$results/$part.$1.log"
  if [[ $status == SKIPPED* ]]; then
    skipped=1
  elif [[ $status != ok* ]]; then
    failed=1
  fi
  record "$(printf '%-22s %-36s %4d s' "$name" "$status" "$step_seconds")"
  local entry
  entry=$(printf '{"name": %s, "status": %s, "seconds": %d, "exit": %d, "numbers": %s' \
    "$(json_string "$name")" "$(json_string "$status")" "$step_seconds" "$step_rc" \
    "$(numbers_of "$log")")
  if [[ -f $results/tests.$name.xml ]]; then
    entry+=", \"gtest\": $(tests_of "$results/tests.$name.xml")"
  fi
  steps_json+=("$entry}")
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
  note_step "$name" "$status"
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
  elif grep -q "$kUnsupported" "$results/$part.$name.log"; then
    status="SKIPPED: the checker cannot run on this machine"
  elif ((step_rc == 0)); then
    status="FAILED: the planted error went unreported"
  elif grep -q "$pattern" "$results/$part.$name.log"; then
    status="ok: reported as planted"
  else
    status="FAILED: exit $step_rc without \"$pattern\""
  fi
  note_step "$name" "$status"
}

part_tests() {
  local t limit
  for t in cuda_layers_test cuda_runtime_test; do
    limit=150
    [[ $t == cuda_runtime_test ]] && limit=250
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
  expect_report planted_overrun 120 "Invalid __global__ write" \
    env SPILL_CUDA_MEMCHECK=1 SPILL_MEMCHECK_PLANT=1 "${memcheck[@]}" \
    "$bundle/bin/cuda_runtime_test" --gtest_filter=CudaMemcheckTest.PoolAnnotationsBoundEachTensor
  # compute-sanitizer does not run under every virtualisation (gVisor: it
  # refuses the device): then the part says so rather than fail or pass.
  ((skipped)) && return 0
  # Every kernel and copy of a few steps in the tightest mode, with the
  # pool's blocks annotated: out-of-bounds, misaligned, between tensors.
  step memcheck_training 270 env SPILL_CUDA_MEMCHECK=1 "${memcheck[@]}" \
    "$bundle/bin/bench_train" --config models/resnet18.yaml --set stem=cifar --set size=32 \
    --set classes=10 --device cuda --memory superneurons --minimum --batch 32 --steps 2 \
    --warmup 1 --no-calibration
}

part_bench() {
  # The same network and initial weights for both frameworks; each figure
  # twice, after a warm-up, so a reader sees how well it repeats.
  local export=/tmp/spill_resnet50_export mode
  for mode in baseline liveness superneurons; do
    step "resnet50_$mode" 75 "$bundle/bin/bench_train" --config models/resnet50.yaml \
      --device cuda --device-memory 40GiB --memory "$mode" --batch 64 --warmup 5 --steps 100 \
      --repeat 2 --export "$export"
  done
  step resnet50_pytorch 150 env PYTHONUNBUFFERED=1 python3 tools/bench/bench_torch.py "$export" \
    --warmup 5 --steps 100 --repeat 2 --device cuda --tf32 both --deterministic
}

part_scale_widest() {
  local mode
  for mode in liveness superneurons; do
    step "widest_$mode" 170 "$bundle/bin/widest" --config models/resnet50.yaml --device cuda \
      --device-memory 12GiB --memory "$mode" --confirm 2
  done
}

part_scale_deepest() {
  step deepest_liveness 120 "$bundle/bin/deepest" --device cuda --device-memory 12GiB --batch 16 \
    --memory liveness --confirm 2
  step deepest_superneurons 270 "$bundle/bin/deepest" --device cuda --device-memory 12GiB \
    --batch 16 --memory superneurons --confirm 2
}

# The bundle as gpu_bundle.sh compressed it, unpacked once.
unpack_bundle() {
  [[ -d $bundle/bin ]] && return 0
  if [[ -f $bundle.tar.xz ]]; then
    tar -C "$(dirname "$bundle")" -xJf "$bundle.tar.xz" && return 0
    # No xz program: Python's own lzma reads it.
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$bundle.tar.xz" "$(dirname "$bundle")" && return 0
  fi
  echo "gpu_check: no bundle at $bundle or $bundle.tar.xz; build it with" \
    "bash tools/ci/gpu_bundle.sh and carry .carry/gpu.tar.xz" >&2
  return 1
}

# The machine and the libraries, at the head of each summary. Fails when a
# binary of the bundle would not load.
machine=""
preamble() {
  source tools/ci/gpu_env.sh
  LD_LIBRARY_PATH=$(LD_LIBRARY_PATH=$outer_library_path spill_cuda_library_path "$bundle")
  export LD_LIBRARY_PATH
  record "part $part: ${about[$part]}"
  machine="no nvidia-smi"
  if command -v nvidia-smi >/dev/null; then
    machine=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 |
      head -1)
  fi
  record "machine: $machine"
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
  echo "device tool, with the compressed bundle carried in (no Bazel there):"
  echo
  if [[ -f $bundle.tar.xz ]]; then
    echo "  bundle: $bundle.tar.xz, $(du -h "$bundle.tar.xz" | cut -f1), built" \
      "$(date -r "$bundle.tar.xz" '+%F %R')"
  else
    echo "  bundle: $bundle.tar.xz is missing; make it first: bash tools/ci/gpu_bundle.sh"
  fi
  echo
  local total=0 n=1 p over=0
  for p in "${parts[@]}"; do
    echo "  $n. $p: ${about[$p]}"
    echo "     run(command=\"bash tools/ci/gpu_check.sh $p\", carry=[\"$bundle.tar.xz\"]," \
      "timeout_s=$kCallSeconds)"
    echo "     expected about $((expected[$p] / 60)) min $((expected[$p] % 60)) s (an estimate;" \
      "under $((kPartLimit / 60)) min); the part stops itself at $kPartSeconds s"
    ((expected[$p] < kPartLimit && expected[$p] <= kPartSeconds)) || over=1
    "part_$p"
    total=$((total + expected[$p]))
    n=$((n + 1))
    echo
  done
  echo "  expected in all: about $((total / 60)) min of device time, plus a minute or two to start"
  echo "  the machine; results come back as PART.summary, PART.json and one log per step."
  if ((over)); then
    echo "gpu_check: a part's estimate does not fit $kPartSeconds s" >&2
    return 1
  fi
}

run_part() {
  part=$1
  failed=0
  skipped=0
  steps_json=()
  mkdir -p "$results"
  : >"$results/$part.summary"
  deadline=$((SECONDS + kPartSeconds))
  local start=$SECONDS status
  if preamble; then
    "part_$part"
  else
    failed=1
  fi
  if ((failed)); then
    status="FAILED"
  elif ((skipped)); then
    status="SKIPPED"
  else
    status="ok"
  fi
  record "part $part: $status in $((SECONDS - start)) s"
  write_json "$status" "$machine" "$((SECONDS - start))"
}

[[ $# -gt 0 ]] || usage
if [[ $1 == --dry-run ]]; then
  dry_run_report
  exit $?
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
unpack_bundle || exit 2
any_failed=0
for p in "${selected[@]}"; do
  run_part "$p"
  ((failed)) && any_failed=1
done
exit $any_failed

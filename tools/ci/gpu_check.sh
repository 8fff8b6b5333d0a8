#!/usr/bin/env bash
# Checks spill on a GPU machine, from the repository root, with the bundle
# that tools/ci/gpu_bundle.sh made (.carry/gpu.tar.xz, unpacked here into
# .carry/gpu/ on first use).
#
# The one command to run when a GPU is lent is the window (what the script
# runs without an argument): one device call of at most 8 minutes, its
# unpacking and margin included, that does the most valuable work first,
# because a lent machine comes rarely, for about a quarter of an hour, and
# starts bare:
#
#   1. the CUDA tests, SPILL_REQUIRE_GPU=1, about 4 minutes of limits in all:
#      cuda_runtime_test (every memory mode bit-identical, plan == run),
#      then cuda_layers_test's layers against the CPU, then its slices of
#      the batch (the same binary, split by gtest filter);
#   2. ResNet-50 at scale against in core, under a 12 GiB budget: batch 147
#      under liveness (nothing leaves the device), widest's superneurons
#      batch (964 on the H200) with its iteration simulated on the h200
#      device profile (h100-pcie5 where widest does not know h200), then
#      that batch trained for real: images per second of both runs, their
#      ratio and the simulated rate, in window.json's "at_scale";
#   3. in what is left of the window: the sanitize part's steps, then the
#      bench part's spill against PyTorch at TF32 off only.
#
# Every step is time-limited, its limit cut to what is left of the window,
# and a step stopped at its limit still leaves its entry (status "timeout",
# its seconds and the numbers its log has so far). Everything the window
# writes - window.summary, window.json, one log per step, the gtest XML -
# goes into one archive, window.tar.gz, with window.json also beside it, in
# $OUT (the files a lent machine sends back: at most 8 per call) or
# gpu_results/. The window's status is ok, FAILED, or partial (a step
# skipped, or one of step 3's stopped because the window ran out).
#
# The same work also comes in parts, each made to fit one device call of
# eight minutes with room to spare, for when more time is lent:
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
#   precision      ResNet-50, batch 64, liveness: spill with bf16 activations and
#                  with TF32 math, against PyTorch under autocast (bfloat16)
#                  and with TF32 on (these paths have not run on a GPU before)
#   scale_widest   the widest batch of ResNet-50 under a 12 GiB budget, planned,
#                  then trained for two steps, under two memory modes
#   scale_deepest  the deepest ResNet under 12 GiB at batch 16, likewise
#
#   bash tools/ci/gpu_check.sh              # there: the window (also: window)
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
#
# For tests of this script: SPILL_GPU_WINDOW_SECONDS shortens the window and
# SPILL_GPU_STEP_SECONDS caps every step's limit.

# The parts' functions are called by name ("part_$p"), which shellcheck
# cannot follow.
# shellcheck disable=SC2317
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2

bundle=${SPILL_GPU_BUNDLE:-.carry/gpu}  # another place for the bundle (tests)
results=${OUT:-gpu_results}
kPartSeconds=420     # each part's own deadline: 7 minutes
kPartLimit=480       # what a part must fit, with its deadline's margin: 8 minutes
kCallSeconds=600     # the device call's limit (timeout_s)
window_seconds=${SPILL_GPU_WINDOW_SECONDS:-480}  # the window, from the script's start
# Of the window, kept from its steps: unpacking the bundle, the preamble, the
# 15 s a stopped step has to die, and the archive.
kWindowMargin=30
kStepLeast=15        # a step given less than this is not started
step_cap=${SPILL_GPU_STEP_SECONDS:-0}  # every step's limit at most this (0: none)
parts=(tests sanitize bench precision scale_widest scale_deepest scale_planners)
declare -A about=(
  [window]="CUDA tests, ResNet-50 at scale against in core, then sanitize and bench in what is left"
  [tests]="CUDA layer and runtime tests, SPILL_REQUIRE_GPU=1"
  [sanitize]="compute-sanitizer memcheck: a planted pool overrun, then a clean training run"
  [bench]="ResNet-50 speed in three memory modes against PyTorch (TF32 off, on, deterministic)"
  [precision]="ResNet-50 in bf16 and in tf32 against PyTorch's autocast and TF32"
  [scale_widest]="widest ResNet-50 batch under 12 GiB, confirmed by two steps"
  [scale_deepest]="deepest ResNet under 12 GiB, confirmed by two steps"
  [scale_planners]="ResNet-50 at batch 964 under 12 GiB with search, greedy and window, against in core"
)
# Estimates, not measurements: no GPU has run these yet. From the CPU runs of
# the same work and the H100's speed; the step limits bound them either way.
declare -A expected=([tests]=300 [sanitize]=300 [bench]=330 [precision]=300 [scale_widest]=240
  [scale_deepest]=330 [scale_planners]=270)
# The window's steps, in seconds: what each took in the window's one run on
# an H200 (tools/ci/README.md), rounded up.
declare -A step_expected=(
  [cuda_runtime_test]=40 [cuda_layers_test]=5 [cuda_slices_test]=5
  [resnet50_in_core]=15 [widest_superneurons]=5 [resnet50_at_scale]=60
  [planted_overrun]=5 [memcheck_training]=5 [resnet50_liveness]=25 [resnet50_pytorch]=35
)

# What compute-sanitizer says where it cannot watch the GPU.
kUnsupported="Device not supported"
# Where bench_train exports the network and weights for bench_torch.py.
kExport=/tmp/spill_resnet50_export
# ResNet-50's largest batches under 12 GiB (tools/bench/RESULTS.md): under
# liveness nothing leaves the device (the in-core run); under superneurons
# widest's search gives the batch at scale - a search of about twenty plans,
# seconds, in the call that also simulates it - and 964, what it found on
# the H200, where the search gives none.
kInCoreBatch=147
kWidestBatch=964

dry_run=""
outer_library_path=${LD_LIBRARY_PATH:-}
failed=0
skipped=0
short=0       # a step of the window's last group stopped for want of time
optional=0    # in the window's last group: running out of time is no failure
deadline=0
part=""
steps_json=()
step_extra=""  # more fields for the next step's JSON entry
part_extra=""  # more fields for the part's JSON
dry_fixed=0    # the dry run's sum of the window's fixed limits

usage() {
  echo "usage: bash tools/ci/gpu_check.sh [window | PART... | all | --dry-run]" \
    "  (no argument: the window; parts: ${parts[*]})" >&2
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

json_number() {  # json_number TEXT: TEXT, or null when it is empty
  printf '%s' "${1:-null}"
}

step_log() {  # step_log NAME: the log of the part's step NAME
  echo "$results/$part.$1.log"
}

# numbers_of LOG: the numbers a step's log reports, as a JSON array of
# {"line", "value"}: images per second (bench, and simulated by widest), the
# batch or depth found (scale), the counts of a gtest XML report beside it
# (tests).
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
    [[ -n $part_extra ]] && printf '%s\n' "$part_extra"
    printf '  "steps": [\n'
    for ((i = 0; i < ${#steps_json[@]}; ++i)); do
      printf '    %s%s\n' "${steps_json[$i]}" "$( ((i + 1 < ${#steps_json[@]})) && echo ,)"
    done
    printf '  ]\n}\n'
  } >"$results/$part.json"
}

# run_step NAME LIMIT_S COMMAND...: runs COMMAND under a time limit (cut to
# what is left of the part), its output in PART.NAME.log; sets step_ran (0:
# too little time was left to start it), step_rc (124: out of time),
# step_seconds, step_limit (the limit it ran under) and step_cut (1: the
# limit was cut to what was left).
run_step() {
  local name=$1 limit=$2
  shift 2
  ((step_cap > 0 && limit > step_cap)) && limit=$step_cap
  local left=$((deadline - SECONDS)) log
  log=$(step_log "$name")
  step_cut=0
  ((limit > left)) && step_cut=1
  if ((left < kStepLeast)); then
    step_ran=0
    step_cut=1
    step_rc=124
    step_seconds=0
    step_limit=$((left > 0 ? left : 0))
    echo "--- $name: not run, $step_limit s left of the $part's time: $*" | tee "$log"
    return
  fi
  ((step_cut)) && limit=$left
  step_ran=1
  step_limit=$limit
  local start=$SECONDS
  echo "--- $name (limit $limit s): $*" | tee "$log"
  timeout --kill-after=15 "$limit" "$@" >>"$log" 2>&1
  step_rc=$?
  step_seconds=$((SECONDS - start))
  tail -n 20 "$log"
  ((step_rc == 137)) && step_rc=124
}

# run_status: the status of run_step's run of a step that must succeed.
run_status() {
  if ((!step_ran)); then
    echo "not run: no time left"
  elif ((step_rc == 124)); then
    echo "timeout"
  elif ((step_rc != 0)); then
    echo "FAILED: exit $step_rc"
  else
    echo "ok"
  fi
}

# Notes a finished step: its summary line and its JSON entry. In the
# window's last group, a step stopped because the window ran out is neither
# passed nor failed (that group has only what is left).
note_step() {
  local name=$1 status=$2 log
  log=$(step_log "$1")
  if [[ $status == SKIPPED* ]]; then
    skipped=1
  elif [[ $status == ok* ]]; then
    :
  elif ((optional && step_cut)) && [[ $status == timeout || $status == "not run"* ]]; then
    short=1
  else
    failed=1
  fi
  local shown=$status
  ((step_ran && step_cut)) && [[ $status == timeout ]] && shown="timeout (cut to $step_limit s)"
  record "$(printf '%-22s %-36s %4d s' "$name" "$shown" "$step_seconds")"
  local entry code=null cut=false
  ((step_ran)) && code=$step_rc
  ((step_cut)) && cut=true
  entry=$(printf '{"name": %s, "status": %s, "seconds": %d, "limit": %d, "cut": %s, ' \
    "$(json_string "$name")" "$(json_string "$status")" "$step_seconds" "$step_limit" "$cut")
  entry+=$(printf '"exit": %s, "numbers": %s' "$code" "$(numbers_of "$log")")
  if [[ -f $results/$part.$name.xml ]]; then
    entry+=", \"gtest\": $(tests_of "$results/$part.$name.xml")"
  fi
  steps_json+=("$entry$step_extra}")
  step_extra=""
}

# dry_step NAME LIMIT_S COMMAND...: a step as the dry run shows it; in the
# window also its estimate, and, in its last group, that its limit is cut to
# what is left ("up to").
dry_step() {
  local name=$1 limit=$2
  shift 2
  if [[ $part != window ]]; then
    printf '       %-22s limit %3d s: %s\n' "$name" "$limit" "$*"
  elif ((optional)); then
    printf '       %-22s up to %3d s, about %3d s: %s\n' "$name" "$limit" \
      "${step_expected[$name]}" "$*"
  else
    printf '       %-22s limit %3d s, about %3d s: %s\n' "$name" "$limit" \
      "${step_expected[$name]}" "$*"
    dry_fixed=$((dry_fixed + limit))
  fi
}

# step NAME LIMIT_S COMMAND...: a step that must succeed.
step() {
  local name=$1 limit=$2
  shift 2
  if [[ -n $dry_run ]]; then
    dry_step "$name" "$limit" "$@"
    return 0
  fi
  run_step "$name" "$limit" "$@"
  note_step "$name" "$(run_status)"
}

# expect_report NAME LIMIT_S PATTERN COMMAND...: a step that must fail with
# PATTERN in its output (a planted error that a checker has to find).
expect_report() {
  local name=$1 limit=$2 pattern=$3
  shift 3
  if [[ -n $dry_run ]]; then
    dry_step "$name" "$limit" "$@"
    printf '%33s(must fail, reporting "%s")\n' "" "$pattern"
    return 0
  fi
  run_step "$name" "$limit" "$@"
  local status log
  log=$(step_log "$name")
  if ((!step_ran || step_rc == 124)); then
    status=$(run_status)
  elif grep -q "$kUnsupported" "$log"; then
    status="SKIPPED: the checker cannot run on this machine"
  elif ((step_rc == 0)); then
    status="FAILED: the planted error went unreported"
  elif grep -q "$pattern" "$log"; then
    status="ok: reported as planted"
  else
    status="FAILED: exit $step_rc without \"$pattern\""
  fi
  note_step "$name" "$status"
}

# gtest_step NAME LIMIT_S BINARY [FILTER]: a CUDA test binary of the bundle
# with SPILL_REQUIRE_GPU=1, its report in PART.NAME.xml.
gtest_step() {
  local name=$1 limit=$2 binary=$3 filter=${4:-}
  local args=("--gtest_output=xml:$results/$part.$name.xml")
  [[ -n $filter ]] && args+=("--gtest_filter=$filter")
  step "$name" "$limit" env SPILL_REQUIRE_GPU=1 "$bundle/bin/$binary" "${args[@]}"
}

part_tests() {
  local t limit
  for t in cuda_layers_test cuda_runtime_test; do
    limit=150
    [[ $t == cuda_runtime_test ]] && limit=250
    gtest_step "$t" "$limit" "$t"
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

# bench_spill NAME LIMIT_S MODE [FLAG...]: ResNet-50, batch 64, in MODE, 100
# steps twice after a warm-up, its network and initial weights exported for
# bench_torch (each figure twice, so a reader sees how well it repeats).
bench_spill() {
  local name=$1 limit=$2 mode=$3
  shift 3
  step "$name" "$limit" "$bundle/bin/bench_train" --config models/resnet50.yaml \
    --device cuda --device-memory 40GiB --memory "$mode" --batch 64 --warmup 5 --steps 100 \
    --repeat 2 --export "$kExport" "$@"
}

# bench_torch LIMIT_S FLAG...: PyTorch on the same network and initial weights
# (step resnet50_pytorch, or the name in $torch_step).
bench_torch() {
  local limit=$1
  shift
  step "${torch_step:-resnet50_pytorch}" "$limit" env PYTHONUNBUFFERED=1 python3 \
    tools/bench/bench_torch.py "$kExport" --warmup 5 --steps 100 --repeat 2 --device cuda "$@"
}

part_bench() {
  local mode
  for mode in baseline liveness superneurons; do
    bench_spill "resnet50_$mode" 75 "$mode"
  done
  bench_torch 150 --tf32 both --deterministic
}

part_precision() {
  bench_spill resnet50_bf16 75 liveness --precision bf16
  bench_spill resnet50_tf32 60 liveness --precision tf32
  torch_step=resnet50_pytorch_autocast bench_torch 75 --tf32 off --autocast bf16
  torch_step=resnet50_pytorch_tf32 bench_torch 60 --tf32 on
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

# The planners that search, measured where the simulation ranks them
# (tools/bench/RESULTS.md, speed at scale: search 63.3 %, greedy 56.4 %,
# window 39.2 % of in core on h200 at batch 964), each planned on the h200
# profile, beside the in-core batch's rate; superneurons at this batch is
# the window's resnet50_at_scale.
part_scale_planners() {
  local wide=(--config models/resnet50.yaml --device cuda --device-memory 12GiB
    --host-memory 64GiB --warmup 1 --steps 2 --batch "$kWidestBatch")
  step resnet50_in_core 40 "$bundle/bin/bench_train" --config models/resnet50.yaml --device cuda \
    --device-memory 12GiB --memory liveness --batch "$kInCoreBatch" --warmup 3 --steps 20
  step resnet50_search 120 "$bundle/bin/bench_train" "${wide[@]}" --memory search \
    --allocator best_fit --planner-profile h200
  step resnet50_greedy 110 "$bundle/bin/bench_train" "${wide[@]}" --memory greedy \
    --allocator first_fit --planner-profile h200
  step resnet50_window 110 "$bundle/bin/bench_train" "${wide[@]}" --memory window \
    --allocator first_fit
}

# The window: the tests, most valuable first, within 240 s of limits.
window_tests() {
  gtest_step cuda_runtime_test 110 cuda_runtime_test
  gtest_step cuda_layers_test 70 cuda_layers_test "-*CudaSlicesTest.*"
  gtest_step cuda_slices_test 60 cuda_layers_test "*CudaSlicesTest.*"
}

# widest_step LIMIT_S FLAG...: widest's superneurons batch, planned (no
# --confirm: the next step trains it), and its iteration simulated on the
# h200 profile - or on h100-pcie5 where this widest does not know h200 (a
# profile being added), which it refuses at once, before any planning. The
# simulation is widest's: the bundle has no `plan` (it links OpenCV through
# the training library, some 170 MiB of libraries, over the bundle's limit),
# and widest runs the same simulator (memory/sim) on the very plan it found.
# Sets wide_batch, wide_from, sim_profile and sim_note.
widest_step() {
  local limit=$1
  shift
  local command=("$bundle/bin/widest" "$@" --device-profile)
  wide_batch=$kWidestBatch
  wide_from="fixed: widest found none"
  sim_profile=h200
  sim_note=""
  if [[ -n $dry_run ]]; then
    dry_step widest_superneurons "$limit" "${command[@]}" h200
    printf '%33s(h100-pcie5 instead where widest does not know h200)\n' ""
    return 0
  fi
  run_step widest_superneurons "$limit" "${command[@]}" h200
  local log refusal
  log=$(step_log widest_superneurons)
  refusal=$(grep -m1 "unknown device profile 'h200'" "$log")
  if ((step_rc == 2)) && [[ -n $refusal ]]; then
    sim_profile=h100-pcie5
    sim_note="h200 refused ($refusal); simulated on h100-pcie5"
    run_step widest_superneurons "$limit" "${command[@]}" "$sim_profile"
  fi
  step_extra=", \"device_profile\": $(json_string "$sim_profile")"
  [[ -n $sim_note ]] && step_extra+=", \"note\": $(json_string "$sim_note")"
  note_step widest_superneurons "$(run_status)"
  local found
  found=$(grep -m1 '^largest batch of' "$log" | grep -oE ': [0-9]+; peak' | grep -oE '[0-9]+')
  if [[ -n $found ]]; then
    wide_batch=$found
    wide_from="widest"
  fi
}

# The window: ResNet-50 at 224x224 under 12 GiB, trained at the in-core
# batch and at widest's batch (bench_train's flags as the bench part gives
# them; the host pool widest plans with, 64 GiB, for what leaves the device).
window_scale() {
  local net=(--config models/resnet50.yaml --device cuda --device-memory 12GiB)
  step resnet50_in_core 40 "$bundle/bin/bench_train" "${net[@]}" --memory liveness \
    --batch "$kInCoreBatch" --warmup 3 --steps 20 --repeat 2
  widest_step 30 "${net[@]}" --memory superneurons
  step resnet50_at_scale 120 "$bundle/bin/bench_train" "${net[@]}" --memory superneurons \
    --host-memory 64GiB --batch "$wide_batch" --warmup 1 --steps 2
  if [[ -n $dry_run ]]; then
    printf '%33s(--batch: what widest_superneurons found, %d where it found none)\n' "" \
      "$kWidestBatch"
    return 0
  fi
  note_scale
}

mean_rate() {  # mean_rate LOG: the mean of bench_train's images per second in LOG
  grep -E '^spill .* images/s' "$1" 2>/dev/null | grep -oE '[0-9]+(\.[0-9]+)? images/s' |
    awk '{ s += $1; n++ } END { if (n) printf "%.2f", s / n }'
}

# The at-scale run against the in-core run, and the simulated iteration:
# window.json's "at_scale" and a line of the summary.
note_scale() {
  local in_core at_scale ratio="" predicted ms rate
  in_core=$(mean_rate "$(step_log resnet50_in_core)")
  at_scale=$(mean_rate "$(step_log resnet50_at_scale)")
  if [[ -n $in_core && -n $at_scale ]]; then
    ratio=$(awk -v a="$at_scale" -v b="$in_core" 'BEGIN { if (b > 0) printf "%.4f", a / b }')
  fi
  predicted=$(grep -m1 '^predicted on ' "$(step_log widest_superneurons)" 2>/dev/null)
  ms=$(echo "$predicted" | grep -oE '[0-9]+(\.[0-9]+)? ms per iteration' | grep -oE '^[0-9.]+')
  rate=$(echo "$predicted" | grep -oE '[0-9]+(\.[0-9]+)? images/s' | grep -oE '^[0-9.]+')
  part_extra=$(printf '  "at_scale": {"model": "models/resnet50.yaml", "device_memory": "12GiB",'
    printf ' "in_core": {"batch": %d, "memory": "liveness", "images_per_s": %s},' \
      "$kInCoreBatch" "$(json_number "$in_core")"
    printf ' "at_scale": {"batch": %d, "batch_from": %s, "memory": "superneurons",' \
      "$wide_batch" "$(json_string "$wide_from")"
    printf ' "host_memory": "64GiB", "images_per_s": %s},' "$(json_number "$at_scale")"
    printf ' "ratio": %s,' "$(json_number "$ratio")"
    printf ' "simulated": {"by": "widest", "device_profile": %s, "ms_per_iteration": %s,' \
      "$(json_string "$sim_profile")" "$(json_number "$ms")"
    printf ' "images_per_s": %s, "note": %s}},' "$(json_number "$rate")" \
      "$(json_string "${sim_note:-simulated, not measured}")")
  local scale="at scale, batch $wide_batch ($wide_from): ${at_scale:-no} images/s"
  local core="in core, batch $kInCoreBatch: ${in_core:-no} images/s"
  record "$scale; $core; ratio ${ratio:-none}; simulated on $sim_profile: ${rate:-no} images/s"
}

# The window's last group: what is left of it, sanitize first, then spill
# against PyTorch at TF32 off (like for like).
window_rest() {
  optional=1
  part_sanitize
  bench_spill resnet50_liveness 75 liveness
  bench_torch 90 --tf32 off
  optional=0
}

part_window() {
  window_tests
  window_scale
  [[ -n $dry_run ]] && echo "     then what is left of the window, each limit cut to it:"
  window_rest
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
  # shellcheck source=tools/ci/gpu_env.sh disable=SC1091
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

minutes() {  # minutes SECONDS: "M min S s"
  echo "$(($1 / 60)) min $(($1 % 60)) s"
}

# The window in the dry run: its call, its steps in order with their limits
# and estimates, and its limits against the window.
window_report() {
  local estimate=0 s
  for s in "${step_expected[@]}"; do estimate=$((estimate + s)); done
  part=window
  echo "  1. window: the one command to run when a GPU is lent - ${about[window]}"
  echo "     run(command=\"bash tools/ci/gpu_check.sh\", carry=[\"$bundle.tar.xz\"]," \
    "timeout_s=$kCallSeconds)"
  echo "     expected about $(minutes "$estimate") (an estimate; under $((window_seconds / 60))" \
    "min); the window stops itself at $window_seconds s, unpacking included"
  echo "     steps, most valuable first (limit: the most a step may take, cut to what is left;"
  echo "     about: what it took in the window's one run on an H200, rounded up):"
  dry_fixed=0
  # shellcheck disable=SC2016  # shown as written: the folder packed into window.tar.gz
  results='$WORK'
  part_window
  local rest=$((window_seconds - kWindowMargin - dry_fixed))
  echo "     limits $dry_fixed s + margin $kWindowMargin s = $((dry_fixed + kWindowMargin)) s of" \
    "the $window_seconds s window; sanitize and bench share the rest, at least $rest s"
  echo "     results: \$WORK (window.summary, window.json, every step's log and gtest XML)" \
    "packed into \$OUT/window.tar.gz, and window.json beside it"
  part=""
  ((estimate < window_seconds && rest >= 0))
}

dry_run_report() {
  dry_run=1
  echo "When a GPU is lent: one device call, the window, with the compressed bundle carried in"
  echo "(no Bazel there). With more time, the parts, one device call each, in this order."
  echo
  if [[ -f $bundle.tar.xz ]]; then
    echo "  bundle: $bundle.tar.xz, $(du -h "$bundle.tar.xz" | cut -f1), built" \
      "$(date -r "$bundle.tar.xz" '+%F %R')"
  else
    echo "  bundle: $bundle.tar.xz is missing; make it first: bash tools/ci/gpu_bundle.sh"
  fi
  echo
  local over=0
  window_report || over=1
  echo
  # shellcheck disable=SC2016  # shown as written, for the device call
  results='$OUT'
  local total=0 n=2 p
  for p in "${parts[@]}"; do
    part=$p
    echo "  $n. $p: ${about[$p]}"
    echo "     run(command=\"bash tools/ci/gpu_check.sh $p\", carry=[\"$bundle.tar.xz\"]," \
      "timeout_s=$kCallSeconds)"
    echo "     expected about $(minutes "${expected[$p]}") (an estimate;" \
      "under $((kPartLimit / 60)) min); the part stops itself at $kPartSeconds s"
    ((expected[$p] < kPartLimit && expected[$p] <= kPartSeconds)) || over=1
    "part_$p"
    total=$((total + expected[$p]))
    n=$((n + 1))
    echo
  done
  echo "  the parts in all: about $((total / 60)) min of device time, plus a minute or two to"
  echo "  start the machine; results come back as PART.summary, PART.json and one log per step."
  if ((over)); then
    echo "gpu_check: an estimate or the window's limits do not fit their deadline" >&2
    return 1
  fi
}

# The window's files, packed: window.tar.gz, and window.json beside it, in
# DEST (a lent machine sends back at most 8 files).
archive_window() {
  local staging=$1 dest=$2 files
  files=("$staging"/*)
  mkdir -p "$dest"
  tar -C "$staging" -czf "$dest/window.tar.gz" "${files[@]##*/}" &&
    cp "$staging/window.json" "$dest/window.json" &&
    echo "window: ${#files[@]} files in $dest/window.tar.gz; window.json beside it" &&
    rm -rf "$staging"
}

# run_part PART FROM: the part. The window's deadline and time count from
# FROM: the script's start when it runs first, so that unpacking counts.
run_part() {
  part=$1
  local start=$SECONDS dest=$results
  failed=0
  skipped=0
  short=0
  steps_json=()
  part_extra=""
  if [[ $part == window ]]; then
    # Its files gather apart, then travel as one archive.
    results=$(mktemp -d "${TMPDIR:-/tmp}/spill_window.XXXXXX") || results=$dest/window.work
    start=$2
    deadline=$((start + window_seconds - kWindowMargin))
  else
    deadline=$((SECONDS + kPartSeconds))
  fi
  mkdir -p "$results"
  : >"$results/$part.summary"
  local status
  if preamble; then
    "part_$part"
  else
    failed=1
  fi
  if ((failed)); then
    status="FAILED"
  elif [[ $part == window ]] && ((skipped || short)); then
    status="partial"
  elif ((skipped)); then
    status="SKIPPED"
  else
    status="ok"
  fi
  record "part $part: $status in $((SECONDS - start)) s"
  write_json "$status" "$machine" "$((SECONDS - start))"
  if [[ $part == window ]]; then
    archive_window "$results" "$dest" || failed=1
    results=$dest
  fi
}

(($# > 0)) || set -- window
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
from=0
for p in "${selected[@]}"; do
  run_part "$p" "$from"
  ((failed)) && any_failed=1
  from=$SECONDS
done
exit $any_failed

#!/usr/bin/env bash
# tools/ci/gpu_check.sh without a GPU:
#   * --dry-run shows the window first - its steps in priority order (the
#     CUDA tests, then ResNet-50 at scale against in core, then sanitize and
#     bench in what is left), each with its limit and estimate, the fixed
#     limits and the margin within 480 s - then every part, each with an
#     estimate under eight minutes and within the part's own deadline, and
#     the device call that runs it;
#   * a part run on a stand-in bundle - shell scripts in place of the
#     binaries, printing what the real ones print, packed and compressed as
#     gpu_bundle.sh packs it - unpacks the bundle, writes its summary, one log
#     per step and PART.json: valid JSON holding each step's status, time
#     and numbers (images per second, the batch found), a failed step
#     recorded as failed;
#   * the script without an argument runs the window: a step that sleeps
#     past its limit (SPILL_GPU_STEP_SECONDS) is recorded as "timeout" with
#     the numbers its log had, the steps after it still run, widest's batch
#     reaches the at-scale run, h200 falls back to h100-pcie5 where widest
#     refuses it, and everything comes back as window.tar.gz (summary, JSON,
#     every log) with window.json beside it - two files;
#   * a window with no time left (SPILL_GPU_WINDOW_SECONDS) starts no step
#     but still records each one and packs its files; an unknown part is a
#     usage error.
set -uo pipefail
check=$1
work=${TEST_TMPDIR:-$(mktemp -d)}
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# ---- The dry run ----
dry=$(bash "$check" --dry-run 2>&1)
rc=$?
echo "$dry"
((rc == 0)) || fail "--dry-run exited $rc"
for part in window tests sanitize bench scale_widest scale_deepest; do
  line=$(echo "$dry" | grep -A2 -E "^  [0-9]+\. $part:" | grep "expected about")
  [[ -n $line ]] || fail "no estimate for $part"
  minutes=$(echo "$line" | sed -E 's/.*expected about ([0-9]+) min ([0-9]+) s.*/\1/')
  seconds=$(echo "$line" | sed -E 's/.*expected about ([0-9]+) min ([0-9]+) s.*/\2/')
  ((minutes * 60 + seconds < 480)) || fail "$part: estimate $minutes min $seconds s"
  [[ $part == window ]] && continue
  echo "$dry" | grep -q "gpu_check.sh $part\"" || fail "no device call for $part"
done
# The window comes first, as a call without an argument.
first=$(echo "$dry" | grep -m1 -E '^  [0-9]+\. ')
[[ $first == "  1. window:"* ]] || fail "the dry run does not start with the window: $first"
window=$(echo "$dry" | awk '/^  1\. window:/ { on = 1; print; next } /^  [0-9]+\. / { on = 0 } on')
echo "$window" | grep -q 'command="bash tools/ci/gpu_check.sh",' ||
  fail "the window's device call is not the script without an argument"
# Its steps in priority order: "limit" for the fixed ones, "up to" for those
# that share what is left.
order=$(echo "$window" | grep -oE '^       [a-z0-9_]+ +(limit|up to) +[0-9]+ s, about +[0-9]+ s' |
  awk '{ print $1 }' | tr '\n' ' ')
want="cuda_runtime_test cuda_layers_test cuda_slices_test resnet50_in_core widest_superneurons"
want+=" resnet50_at_scale planted_overrun memcheck_training resnet50_liveness resnet50_pytorch "
[[ $order == "$want" ]] || fail "the window's steps: '$order', not '$want'"
kinds=$(echo "$window" | grep -oE '^       [a-z0-9_]+ +(limit|up to) ' | awk '{ print $2 }' |
  uniq | tr '\n' ' ')
[[ $kinds == "limit up " ]] || fail "fixed limits and what is left interleave: $kinds"
fixed=$(echo "$window" | grep -oE '^       [a-z0-9_]+ +limit +[0-9]+ s' |
  awk '{ s += $3 } END { print s + 0 }')
margin=$(echo "$window" | grep -oE 'margin [0-9]+ s' | grep -oE '[0-9]+')
total=$(echo "$window" | grep -oE 'margin [0-9]+ s = [0-9]+ s of the 480 s window' |
  grep -oE '= [0-9]+' | grep -oE '[0-9]+')
[[ -n $margin && -n $total ]] || fail "no total of the window's limits"
((${margin:-0} > 0 && fixed + ${margin:-0} == ${total:-0})) ||
  fail "limits $fixed s + margin ${margin:-?} s is not the total ${total:-?} s"
((fixed + ${margin:-480} <= 480)) || fail "the window's limits $fixed s + margin exceed 480 s"
((fixed >= 200)) || fail "the window's fixed limits are implausibly small: $fixed s"
tests_limits=$(echo "$window" | grep -oE '^       cuda_[a-z_]+ +limit +[0-9]+ s' |
  awk '{ s += $3 } END { print s + 0 }')
((tests_limits >= 180 && tests_limits <= 270)) ||
  fail "the CUDA tests' limits are $tests_limits s, not about 4 minutes"

# ---- A part on a stand-in bundle ----
bundle=$work/gpu
mkdir -p "$bundle/bin" "$bundle/lib"
script() {  # script NAME: a stand-in binary running the script on stdin
  {
    echo '#!/usr/bin/env bash'
    cat
  } >"$bundle/bin/$1"
  chmod +x "$bundle/bin/$1"
}
# bench_train: the bench part's batch 64; the window's in-core batch 147;
# and at any other batch (the window's at scale) one run, then a hang.
script bench_train <<'EOF'
batch=64
while (($# > 0)); do [[ $1 == --batch ]] && batch=$2; shift; done
line() { echo "spill resnet50 on cuda, batch $batch: $1 images/s (run $2 of 2)"; }
case $batch in
  64) line 812.50 1; line 815.25 2 ;;
  147) line 612.00 1; line 608.00 2 ;;
  *) line 52.50 1; exec sleep 30 ;;
esac
EOF
# widest: refuses the h200 profile as a widest without it does; simulates on
# another profile when given one.
script widest <<'EOF'
if [[ " $* " == *" --device-profile h200 "* ]]; then
  echo "widest: unknown device profile 'h200' (known: cpu, k40-pcie3, h100-pcie5)" >&2
  exit 2
fi
echo "largest batch of resnet50 under 12.00 GiB: 96; peak 11.9 GiB, 0 B to host"
if [[ " $* " == *" --device-profile "* ]]; then
  echo "predicted on h100-pcie5 (simulated, not measured): 4219.4 ms per iteration" \
    "(228.5 images/s, 28.4% of the roomy run's)"
fi
EOF
# The CUDA tests: their arguments, and a gtest report where asked for one.
for t in cuda_runtime_test cuda_layers_test; do
  script "$t" <<'EOF'
echo "args: $*"
for arg; do
  [[ $arg == --gtest_output=xml:* ]] &&
    echo '<testsuites tests="3" failures="0" disabled="0" errors="0">' >"${arg#--gtest_output=xml:}"
done
exit 0
EOF
done
printf '#!/usr/bin/env bash\necho "deepest ResNet: out of memory" >&2\nexit 3\n' \
  >"$bundle/bin/deepest"
chmod +x "$bundle/bin/deepest"
tar -C "$work" -cJf "$bundle.tar.xz" gpu
rm -rf "$bundle"
out=$work/out
for part in scale_widest bench scale_deepest; do
  OUT=$out SPILL_GPU_BUNDLE=$bundle bash "$check" "$part" >"$work/$part.out" 2>&1
  echo "$part: exit $?"
  cat "$work/$part.out"
done
[[ -x $bundle/bin/widest ]] || fail "the bundle was not unpacked"
for part in scale_widest bench scale_deepest; do
  [[ -s $out/$part.summary ]] || fail "no $part.summary"
  python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$out/$part.json" ||
    fail "$part.json is not JSON"
done
python3 - "$out" <<'PY' || fail "the parts' JSON says the wrong thing"
import json, sys
out = sys.argv[1]
widest = json.load(open(f"{out}/scale_widest.json"))
assert widest["part"] == "scale_widest" and widest["status"] == "ok", widest
names = [s["name"] for s in widest["steps"]]
assert names == ["widest_liveness", "widest_superneurons"], names
assert widest["steps"][0]["numbers"][0]["value"] == 96, widest["steps"][0]
bench = json.load(open(f"{out}/bench.json"))
spill = [s for s in bench["steps"] if s["name"] == "resnet50_liveness"][0]
assert [n["value"] for n in spill["numbers"]] == [812.5, 815.25], spill
assert spill["status"] == "ok" and spill["exit"] == 0, spill
deepest = json.load(open(f"{out}/scale_deepest.json"))
assert deepest["status"] == "FAILED", deepest
assert deepest["steps"][0]["status"] == "FAILED: exit 3", deepest["steps"][0]
print("JSON summaries as expected")
PY
ls "$out"

# ---- The window, as the script runs without an argument ----
# A compute-sanitizer that reports the planted overrun and nothing else.
tools=$work/tools
mkdir -p "$tools"
cat >"$tools/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
if [[ ${SPILL_MEMCHECK_PLANT:-} == 1 ]]; then
  echo "========= Invalid __global__ write of size 4 bytes"
  exit 3
fi
echo "========= ERROR SUMMARY: 0 errors"
EOF
chmod +x "$tools/compute-sanitizer"
window_out=$work/window_out
start=$SECONDS
OUT=$window_out SPILL_GPU_BUNDLE=$bundle SPILL_GPU_STEP_SECONDS=2 PATH="$tools:$PATH" \
  bash "$check" >"$work/window.out" 2>&1
rc=$?
echo "window: exit $rc in $((SECONDS - start)) s"
cat "$work/window.out"
((rc == 1)) || fail "a window with a step out of time exited $rc, not 1"
((SECONDS - start < 60)) || fail "the window ignored its step limits"
files=$(find "$window_out" -mindepth 1 -printf '%f\n' 2>/dev/null | sort | tr '\n' ' ')
[[ $files == "window.json window.tar.gz " ]] ||
  fail "the window's results are '$files', not window.json and window.tar.gz"
unpacked=$work/window_unpacked
mkdir -p "$unpacked"
tar -C "$unpacked" -xzf "$window_out/window.tar.gz" || fail "window.tar.gz does not unpack"
listing=$(tar -tzf "$window_out/window.tar.gz" 2>/dev/null | sort | tr '\n' ' ')
echo "window.tar.gz: $listing"
for f in window.summary window.json; do
  [[ " $listing" == *" $f "* ]] || fail "window.tar.gz lacks $f"
done
for s in $want; do
  [[ " $listing" == *" window.$s.log "* ]] || fail "window.tar.gz lacks the log of $s"
done
cmp -s "$unpacked/window.json" "$window_out/window.json" ||
  fail "window.json beside the archive is not the one in it"
grep -q -- '--gtest_filter=\*CudaSlicesTest\.\*' "$unpacked/window.cuda_slices_test.log" ||
  fail "the slices test ran without its filter"
grep -q -- '--gtest_filter=-\*CudaSlicesTest\.\*' "$unpacked/window.cuda_layers_test.log" ||
  fail "the layers test ran the slices too"
grep -qE '^resnet50_at_scale +timeout' "$unpacked/window.summary" ||
  fail "the summary does not show the step out of time"
python3 - "$window_out/window.json" "$want" "$unpacked" <<'PY' || fail "window.json is wrong"
import json, sys
window = json.load(open(sys.argv[1]))
assert window["part"] == "window" and window["status"] == "FAILED", window["status"]
steps = {s["name"]: s for s in window["steps"]}
assert [s["name"] for s in window["steps"]] == sys.argv[2].split(), list(steps)
late = steps["resnet50_at_scale"]
assert late["status"] == "timeout" and late["exit"] == 124 and late["limit"] == 2, late
assert 2 <= late["seconds"] < 20, late
assert [n["value"] for n in late["numbers"]] == [52.5], late  # what its log had
command = open(f"{sys.argv[3]}/window.resnet50_at_scale.log").readline()
assert "--batch 96 " in command, f"not widest's batch: {command}"
for name in ["cuda_runtime_test", "cuda_layers_test", "cuda_slices_test", "resnet50_in_core",
             "widest_superneurons", "memcheck_training", "resnet50_liveness"]:
    assert steps[name]["status"] == "ok", steps[name]
assert steps["cuda_layers_test"]["gtest"]["tests"] == 3, steps["cuda_layers_test"]
assert steps["planted_overrun"]["status"] == "ok: reported as planted", steps["planted_overrun"]
assert steps["resnet50_pytorch"]["status"] != "not run: no time left", steps["resnet50_pytorch"]
widest = steps["widest_superneurons"]
assert widest["device_profile"] == "h100-pcie5" and "h200 refused" in widest["note"], widest
scale = window["at_scale"]
assert scale["in_core"] == {"batch": 147, "memory": "liveness", "images_per_s": 610.0}, scale
assert scale["at_scale"]["batch"] == 96 and scale["at_scale"]["batch_from"] == "widest", scale
assert scale["at_scale"]["images_per_s"] == 52.5, scale
assert abs(scale["ratio"] - 52.5 / 610) < 1e-3, scale
sim = scale["simulated"]
assert sim["device_profile"] == "h100-pcie5" and sim["images_per_s"] == 228.5, sim
assert sim["ms_per_iteration"] == 4219.4, sim
print("window.json as expected")
PY

# ---- A window with no time left, and an unknown part ----
late_out=$work/late_out
OUT=$late_out SPILL_GPU_BUNDLE=$bundle SPILL_GPU_WINDOW_SECONDS=1 bash "$check" window \
  >"$work/late.out" 2>&1
rc=$?
echo "window without time: exit $rc"
cat "$work/late.out"
((rc == 1)) || fail "a window that ran nothing exited $rc, not 1"
[[ -s $late_out/window.tar.gz ]] || fail "a window that ran nothing packed no archive"
python3 - "$late_out/window.json" "$want" <<'PY' || fail "the late window.json is wrong"
import json, sys
window = json.load(open(sys.argv[1]))
assert window["status"] == "FAILED", window["status"]
assert [s["name"] for s in window["steps"]] == sys.argv[2].split(), window["steps"]
for s in window["steps"]:
    assert s["status"] == "not run: no time left" and s["exit"] is None and s["cut"], s
print("a window without time records every step as not run")
PY
bash "$check" no_such_part >"$work/usage.out" 2>&1
rc=$?
((rc == 2)) || fail "an unknown part exited $rc, not 2"
grep -q '^usage:' "$work/usage.out" || fail "an unknown part printed no usage"

((failures == 0)) && echo "PASS" || echo "$failures failures"
exit $((failures > 0))

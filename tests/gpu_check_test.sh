#!/usr/bin/env bash
# tools/ci/gpu_check.sh without a GPU:
#   * --dry-run lists every part, each with an estimate under eight minutes
#     and within the part's own deadline, and the device call that runs it;
#   * a part run on a stand-in bundle - shell scripts in place of the
#     binaries, printing what the real ones print, packed and compressed as
#     gpu_bundle.sh packs it - unpacks the bundle, writes its summary, one log
#     per step and PART.json: valid JSON holding each step's status, time
#     and numbers (images per second, the batch found), a failed step
#     recorded as failed.
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
for part in tests sanitize bench scale_widest scale_deepest; do
  line=$(echo "$dry" | grep -A2 -E "^  [0-9]+\. $part:" | grep "expected about")
  [[ -n $line ]] || fail "no estimate for $part"
  minutes=$(echo "$line" | sed -E 's/.*expected about ([0-9]+) min ([0-9]+) s.*/\1/')
  seconds=$(echo "$line" | sed -E 's/.*expected about ([0-9]+) min ([0-9]+) s.*/\2/')
  ((minutes * 60 + seconds < 480)) || fail "$part: estimate $minutes min $seconds s"
  echo "$dry" | grep -q "gpu_check.sh $part\"" || fail "no device call for $part"
done

# ---- A part on a stand-in bundle ----
bundle=$work/gpu
mkdir -p "$bundle/bin" "$bundle/lib"
fake() {  # fake NAME LINE...: a stand-in binary printing LINEs
  local name=$1
  shift
  {
    echo '#!/usr/bin/env bash'
    for line in "$@"; do printf 'echo %q\n' "$line"; done
  } >"$bundle/bin/$name"
  chmod +x "$bundle/bin/$name"
}
fake bench_train \
  "spill resnet50 on cuda, batch 64: 812.50 images/s (100 steps in 7.88 s, run 1 of 2)" \
  "spill resnet50 on cuda, batch 64: 815.25 images/s (100 steps in 7.85 s, run 2 of 2)"
fake widest "largest batch of resnet50 under 12.00 GiB: 96; peak 11.9 GiB, 0 B to host"
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
((failures == 0)) && echo "PASS" || echo "$failures failures"
exit $((failures > 0))

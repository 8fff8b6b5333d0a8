#!/usr/bin/env bash
# The timeline simulator against real runs (README, "Where the time goes"):
# builds bench_timeline, waits until the machine is idle enough to time
# anything (the 1-minute load average below IDLE_LOAD, default 1.5, for at
# most WAIT_MINUTES, default 5), calibrates this CPU again and runs it.
# Arguments go to bench_timeline (--networks, --modes, --gbps, --iterations,
# --timelines DIR).
#
# Compute runs on one thread (OMP_NUM_THREADS, default 1): the other core is
# left to the copy worker, as a GPU's copy engine works beside its compute
# units, and a lone thread does not stall at OpenMP's barriers whenever the
# machine deschedules one of two (on a shared machine that made iterations
# swing 1-4x; with one thread they stay within about 10%).
#
#   bash tools/bench/bench_timeline.sh [ARGS]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash tools/setup.sh
bazel build //tools/bench:bench_timeline >/dev/null 2>&1 || bazel build //tools/bench:bench_timeline
bin=$(bazel info bazel-bin 2>/dev/null)/tools/bench/bench_timeline
idle=${IDLE_LOAD:-1.5}
deadline=$(( $(date +%s) + 60 * ${WAIT_MINUTES:-5} ))
while awk -v idle="$idle" '{ exit !($1 >= idle) }' /proc/loadavg; do
  if (( $(date +%s) > deadline )); then
    echo "bench_timeline.sh: the load average stayed at or above $idle; timing anyway" >&2
    break
  fi
  sleep 30
done
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
echo "OMP_NUM_THREADS=$OMP_NUM_THREADS" >&2
"$bin" --calibrate "$@"

#!/usr/bin/env python3
"""Scaling of data-parallel training: 1 process against N ranks under mpirun.

Trains the same configuration (the built-in Fashion-MNIST CNN unless --config
says otherwise) for --steps steps with the same global batch, once in one
process and once per bucket size in --ranks ranks, and prints a Markdown
table from train's --report: images per second (the global batch), and per
step the time some gradient reduction was in flight, how much of it
overlapped backward, how long the training thread waited for a bucket, and
the backward time. The cores are split evenly: each rank gets
cores / ranks OpenMP threads; one process runs with all of them and, for
reference, with as many as one rank gets. Every configuration runs
--repeat times, interleaved, and the fastest run is shown (others' load on
a shared machine only ever slows a run down). OpenMP threads wait passively
(OMP_WAIT_POLICY=PASSIVE), as in the tests.

    bazel build //tools:train
    python3 tools/bench/bench_data_parallel.py --steps 60 --buckets 4MiB,64KiB --zero 0,1

On one machine the ranks share its cores and memory bandwidth, and
"communication" is a copy through shared memory: the numbers show the
mechanism's costs and its overlap, not a cluster's speed-up.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "bazel-bin", "tools", "train")
MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,vader",
    "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
}


def base_config(path):
    if path:
        with open(path) as f:
            return f.read()
    return subprocess.run([TRAIN, "--print-default-config"], check=True,
                          capture_output=True, text=True).stdout


def write_config(work, text, name, bucket, zero):
    path = os.path.join(work, name + ".yaml")
    with open(path, "w") as f:
        f.write(text)
        f.write("\ndistributed: {bucket: %s, zero: %d}\n" % (bucket, zero))
    return path


def train(work, config, name, ranks, threads, steps, timeout):
    report = os.path.join(work, name + ".json")
    args = [TRAIN, "--config", config, "--no-progress", "--overwrite",
            "--max-steps", str(steps), "--output", os.path.join(work, name),
            "--report", report]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_WAIT_POLICY="PASSIVE", **MPI_ENV)
    if ranks > 1:
        args = ["mpirun", "-np", str(ranks), "--oversubscribe", "--bind-to", "none",
                "-x", "OMP_NUM_THREADS", "-x", "OMP_WAIT_POLICY", "--timeout", str(timeout)] + args
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout + 30)
    if done.returncode != 0:
        sys.exit("bench_data_parallel: %s failed:\n%s" % (name, done.stderr[-3000:]))
    with open(report) as f:
        return json.load(f)


def row(label, buckets, r, base):
    c = r.get("communication")
    ms = lambda key: "%.2f" % (1e3 * c[key]) if c else "-"
    overlap = "-"
    if c and c["allreduce_seconds_per_step"] > 0:
        overlap = "%.0f%%" % (100 * c["overlapped_seconds_per_step"] /
                              c["allreduce_seconds_per_step"])
    return "| %s | %s | %.0f | %.2fx | %s | %s | %s | %s | %s |" % (
        label, buckets, r["images_per_second"], r["images_per_second"] / base,
        ms("allreduce_seconds_per_step"), ms("overlapped_seconds_per_step"), overlap,
        ms("wait_seconds_per_step"), ms("backward_seconds_per_step"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="training config (default: the built-in one)")
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--buckets", default="4MiB,64KiB",
                        help="comma-separated distributed.bucket sizes for the ranked runs")
    parser.add_argument("--zero", default="0",
                        help="comma-separated distributed.zero stages for the ranked runs")
    parser.add_argument("--cores", type=int, default=os.cpu_count())
    parser.add_argument("--timeout", type=int, default=1200, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=2, help="runs per configuration")
    a = parser.parse_args()
    if not os.path.exists(TRAIN):
        sys.exit("bench_data_parallel: build it first: bazel build //tools:train")
    text = base_config(a.config)
    per_rank = max(1, a.cores // a.ranks)
    runs = [("1 (%d threads)" % a.cores, "4MiB", 0, 1, a.cores)]
    if per_rank != a.cores:
        runs.append(("1 (%d thread%s)" % (per_rank, "s" if per_rank > 1 else ""), "4MiB", 0, 1,
                     per_rank))
    stages = [int(z) for z in a.zero.split(",")]
    for bucket in a.buckets.split(","):
        for zero in stages:
            label = "%d (bucket %s%s)" % (a.ranks, bucket,
                                          ", zero %d" % zero if len(stages) > 1 else "")
            runs.append((label, bucket, zero, a.ranks, per_rank))
    best = {}
    with tempfile.TemporaryDirectory(prefix="spill_dp_bench_") as work:
        for _ in range(a.repeat):
            for i, (label, bucket, zero, ranks, threads) in enumerate(runs):
                name = "run%d" % i
                r = train(work, write_config(work, text, name, bucket, zero), name, ranks,
                          threads, a.steps, a.timeout)
                if i not in best or r["images_per_second"] > best[i]["images_per_second"]:
                    best[i] = r
    base = best[0]["images_per_second"]
    print("| ranks | buckets | images/s | vs 1 | reduction ms/step | overlapped ms/step "
          "| overlap | waited ms/step | backward ms/step |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, (label, bucket, zero, ranks, threads) in enumerate(runs):
        c = best[i].get("communication")
        print(row(label, c["buckets"] if c else "-", best[i], base))


if __name__ == "__main__":
    main()

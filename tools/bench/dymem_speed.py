#!/usr/bin/env python3
"""Measured iteration time of dymem, vdnn, dymem on vdnn's offload set and
superneurons on this CPU with the copies throttled to a PCIe-like link, every
mode at one budget (the largest of their smallest budgets, so that all of them
run in it), beside the timeline simulator's prediction for the same plans on
the `cpu` profile at that link. Prints a Markdown table.

    /usr/bin/python3 tools/bench/dymem_speed.py [--gbps 0.1] [--rounds 3]
        [--networks resnet50,inception_v4] [--resnet-batch 32]
        [--inception-batch 8 --inception-size 75]

The modes take turns (one process each, one warm-up iteration and one timed
iteration; every round runs every mode once) and the table gives the median
per mode over the rounds, so that load from elsewhere on a shared machine
falls on all of them alike. Compute runs on one thread (OMP_NUM_THREADS=1,
unless set): the other core carries the throttled copies, as a GPU's copy
engine works beside its compute units. Budgets and predictions come from
`plan` with an SGD solver's momentum, as bench_train trains; convolution
algorithms from the same measured timings (--timing measure).
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

# (label, bench_train / plan flags); the first is what the others are compared with.
MODES = [
    ("vdnn", ["--memory", "vdnn"]),
    ("dymem on vdnn's offload set", ["--memory", "dymem", "--offload-set", "conv"]),
    ("dymem", ["--memory", "dymem"]),
    ("superneurons", ["--memory", "superneurons"]),
]
SECONDS = re.compile(r"\((\d+) steps in ([0-9.]+) s")


def networks(args):
    resnet = (f"ResNet-50 b{args.resnet_batch} (CIFAR stem, 32x32)", "models/resnet50.yaml",
              args.resnet_batch, {"stem": "cifar", "size": 32, "classes": 10})
    inception = (f"Inception-v4 b{args.inception_batch} ({args.inception_size}x"
                 f"{args.inception_size})", "models/inception_v4.yaml", args.inception_batch,
                 {"size": args.inception_size, "classes": 10})
    known = {"resnet50": resnet, "inception_v4": inception}
    return [known[n] for n in args.networks.split(",")]


def train_config(directory, model, params):
    """A training config naming the model and bench_train's solver (SGD with
    momentum), so that plan counts the solver state as the run does."""
    path = os.path.join(directory, os.path.basename(model))
    with open(path, "w") as f:
        f.write(f"model:\n  file: {os.path.abspath(model)}\n  params: {json.dumps(params)}\n"
                "data: {dataset: cifar10, path: unused, batch: 1}\n"
                "solver: {type: sgd, lr: 0.01, momentum: 0.9, weight_decay: 5e-4}\n"
                "run: {steps: 1}\n")
    return path


def plan(args, config, batch, extra):
    out = subprocess.run([args.plan, "--config", config, "--batch", str(batch), "--json",
                          "--timing", "measure"] + extra, check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out)["modes"][0]


def measure(args, model, params, batch, flags, budget):
    sets = [x for k, v in params.items() for x in ("--set", f"{k}={v}")]
    out = subprocess.run([args.bench, "--config", model, "--batch", str(batch), "--warmup", "1",
                          "--steps", "1", "--device-memory", str(budget), "--link-gbps",
                          str(args.gbps)] + sets + flags, check=True, capture_output=True,
                         text=True).stdout
    steps, seconds = SECONDS.search(out).groups()
    return float(seconds) / int(steps)


def table(args, directory):
    print(f"| network | budget | mode | moved per iteration | predicted s (cpu profile, "
          f"{args.gbps:g} GB/s) | measured s, median of {args.rounds} | measured runs | "
          "measured vs vdnn | predicted vs vdnn |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    for name, model, batch, params in networks(args):
        config = train_config(directory, model, params)
        minimum = {label: plan(args, config, batch, flags + ["--minimum"])["minimum_budget_bytes"]
                   for label, flags in MODES}
        budget = max(minimum.values())
        predicted, moved = {}, {}
        for label, flags in MODES:
            m = plan(args, config, batch, flags + [
                "--device-memory", str(budget), "--device-profile", "cpu", "--link-gbps",
                str(args.gbps)])
            predicted[label] = m["prediction"]["iteration_seconds"]
            moved[label] = (m["to_host_bytes"] + m["to_device_bytes"]) / 2**20
        runs = {label: [] for label, _ in MODES}
        for _ in range(args.rounds):
            for label, flags in MODES:
                runs[label].append(measure(args, model, params, batch, flags, budget))
        measured = {label: statistics.median(r) for label, r in runs.items()}
        first = MODES[0][0]
        for label, _ in MODES:
            print(f"| {name} | {budget / 2**20:,.1f} MiB | {label} | {moved[label]:,.1f} MiB | "
                  f"{predicted[label]:.2f} | {measured[label]:.2f} | "
                  f"{', '.join(f'{s:.2f}' for s in runs[label])} | "
                  f"{100 * (measured[first] / measured[label] - 1):+.0f}% | "
                  f"{100 * (predicted[first] / predicted[label] - 1):+.0f}% |", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="bazel-bin/tools/plan")
    parser.add_argument("--bench", default="bazel-bin/tools/bench/bench_train")
    parser.add_argument("--gbps", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--networks", default="resnet50,inception_v4")
    parser.add_argument("--resnet-batch", type=int, default=32)
    parser.add_argument("--inception-batch", type=int, default=8)
    parser.add_argument("--inception-size", type=int, default=75)
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with open("/proc/loadavg") as f:
        print(f"load average at the start: {' '.join(f.read().split()[:3])}; "
              f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}\n")
    with tempfile.TemporaryDirectory() as directory:
        table(args, directory)
    with open("/proc/loadavg") as f:
        print(f"\nload average at the end: {' '.join(f.read().split()[:3])}")


if __name__ == "__main__":
    main()

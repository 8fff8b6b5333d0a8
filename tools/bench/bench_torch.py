#!/usr/bin/env python3
"""Training throughput of a network in PyTorch, for comparison with spill.

Rebuilds the network exported by `bench_train --export DIR` (the same
layers, shapes and initial weights) and times SGD steps on synthetic data,
like bench_train does. PyTorch is optional here (tools/setup.sh --bench).

    /usr/bin/python3 tools/bench/bench_torch.py DIR --steps 20 --threads 2
    python3 tools/bench/bench_torch.py DIR --device cuda   # on a GPU (cuDNN autotuned)

On a GPU spill computes in exact float32 (cuDNN's FMA math, cuBLAS's
pedantic mode), while PyTorch by default lets convolutions round their
inputs to TF32 on tensor cores. The like-for-like figure therefore has TF32
off for PyTorch's matrix products and convolutions; the TF32 figure is
reported beside it, labelled, for what PyTorch gives by default
(--tf32 off|on|both, both by default on a GPU).

cuDNN's autotuner (cudnn.benchmark) may pick nondeterministic algorithms,
which spill never runs; --deterministic adds a row, labelled, with TF32 off,
cudnn.deterministic=True and the autotuner off: PyTorch under spill's rules.
--repeat N times N runs of --steps steps each, after one warm-up.
"""
import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np

try:
    import torch
except ImportError:
    sys.exit("bench_torch: PyTorch is not installed (bash tools/setup.sh --bench)")


def load_replica():
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("crosscheck", os.path.join(here, "crosscheck_torch.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def has_setting(module, name):
    """Whether a torch.backends module has a setting (older versions raise
    AssertionError, not AttributeError, for an unknown one)."""
    try:
        getattr(module, name)
        return True
    except (AttributeError, AssertionError):
        return False


def set_tf32(enabled):
    """TF32 tensor cores for float32 matrix products and convolutions."""
    matmul = torch.backends.cuda.matmul
    conv = getattr(torch.backends.cudnn, "conv", None)
    if has_setting(matmul, "fp32_precision") and has_setting(conv, "fp32_precision"):
        # PyTorch 2.9 and later: the old switches are deprecated, and
        # mixing the two interfaces is an error.
        precision = "tf32" if enabled else "ieee"
        matmul.fp32_precision = precision
        conv.fp32_precision = precision
    else:
        matmul.allow_tf32 = enabled
        torch.backends.cudnn.allow_tf32 = enabled


def tf32_state():
    """The settings as PyTorch reports them after set_tf32, for the label."""
    matmul = torch.backends.cuda.matmul
    conv = getattr(torch.backends.cudnn, "conv", None)
    if has_setting(matmul, "fp32_precision") and has_setting(conv, "fp32_precision"):
        return f"matmul {matmul.fp32_precision}, conv {conv.fp32_precision}"
    return f"matmul allow_tf32={matmul.allow_tf32}, cudnn allow_tf32={torch.backends.cudnn.allow_tf32}"


def time_steps(args, spec, weights, crosscheck):
    """Images per second of each of args.repeat runs of args.steps SGD steps
    after args.warmup, with their seconds and CPU seconds (all threads), and
    the last loss."""
    model = crosscheck.Replica(spec, weights, torch.float32, args.device, random_dropout=True)
    solver = torch.optim.SGD([{"params": model.groups["decay"], "weight_decay": 5e-4},
                              {"params": model.groups["no_decay"], "weight_decay": 0.0}],
                             lr=0.01, momentum=0.9)
    shape = spec["layers"][0]["outputs"][0]
    images = (torch.rand(shape) * 2 - 1).to(args.device)
    classes = spec["layers"][-1]["outputs"][0][1]
    labels = (torch.arange(shape[0]) % classes).float().reshape(-1, 1, 1, 1).to(args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)

    def step():
        solver.zero_grad()
        if args.autocast == "bf16":
            with torch.autocast(args.device.split(":")[0], dtype=torch.bfloat16):
                loss = model(images, labels)
        else:
            loss = model(images, labels)
        loss.backward()
        solver.step()
        return loss

    for _ in range(args.warmup):
        step()
    runs = []
    for _ in range(args.repeat):
        sync()
        start, cpu_start = time.time(), time.process_time()
        for _ in range(args.steps):
            loss = step()
        sync()
        seconds, cpu_seconds = time.time() - start, time.process_time() - cpu_start
        runs.append((args.steps * shape[0] / seconds, seconds, cpu_seconds))
    return runs, float(loss)


def settings_for(args):
    """(tf32, deterministic) per row: TF32 off and on, as asked, on a GPU;
    then, with --deterministic, TF32 off under cudnn.deterministic."""
    if not args.device.startswith("cuda"):
        return [(None, False)]
    rows = [(tf32, False) for tf32 in {"off": [False], "on": [True], "both": [False, True]}[args.tf32]]
    if args.deterministic:
        rows.append((False, True))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--tf32", choices=["off", "on", "both"], default="both",
                        help="on a GPU: TF32 off (like for like with spill), on, or both")
    parser.add_argument("--deterministic", action="store_true",
                        help="on a GPU: add a row with TF32 off and cudnn.deterministic=True")
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of --steps steps")
    parser.add_argument("--autocast", choices=["off", "bf16"], default="off",
                        help="bf16: the forward pass under torch.autocast in bfloat16")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    crosscheck = load_replica()
    with open(os.path.join(args.dir, "net.json")) as f:
        spec = json.load(f)
    weights = np.load(os.path.join(args.dir, "initial.npz"))
    batch = spec["layers"][0]["outputs"][0][0]
    for tf32, deterministic in settings_for(args):
        torch.backends.cudnn.benchmark = not deterministic
        torch.backends.cudnn.deterministic = deterministic
        if tf32 is None:
            label = "float32" if args.autocast == "off" else "autocast bfloat16"
        else:
            set_tf32(tf32)
            label = ("TF32 on (PyTorch's default for convolutions; not like for like)" if tf32
                     else "TF32 off (exact float32, like for like with spill)")
            if deterministic:
                label = "TF32 off, cudnn.deterministic=True (spill's rules)"
            if args.autocast == "bf16":
                label = "autocast bfloat16, " + label
            label += f" [{tf32_state()}]"
        runs, loss = time_steps(args, spec, weights, crosscheck)
        for i, (rate, seconds, cpu_seconds) in enumerate(runs):
            print(f"pytorch {torch.__version__} {spec['name']} batch {batch}: "
                  f"{rate:.2f} images/s ({args.steps} steps in {seconds:.2f} s, "
                  f"{cpu_seconds:.2f} cpu-s, run {i + 1} of {len(runs)}, {args.device}, "
                  f"{args.threads} threads, {label}, last loss {loss:.4f})", flush=True)


if __name__ == "__main__":
    main()

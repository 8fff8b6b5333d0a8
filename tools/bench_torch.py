#!/usr/bin/env python3
"""Training throughput of a network in PyTorch, for comparison with spill.

Rebuilds the network exported by `bench_train --export DIR` (the same
layers, shapes and initial weights) and times SGD steps on synthetic data,
like bench_train does. PyTorch is optional here (tools/setup.sh --bench).

    /usr/bin/python3 tools/bench_torch.py DIR --steps 20 --threads 2
    python3 tools/bench_torch.py DIR --device cuda   # on a GPU (cuDNN autotuned)
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dir")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.backends.cudnn.benchmark = True
    crosscheck = load_replica()
    with open(os.path.join(args.dir, "net.json")) as f:
        spec = json.load(f)
    weights = np.load(os.path.join(args.dir, "initial.npz"))
    model = crosscheck.Replica(spec, weights, torch.float32, args.device)
    solver = torch.optim.SGD([{"params": model.groups["decay"], "weight_decay": 5e-4},
                              {"params": model.groups["no_decay"], "weight_decay": 0.0}],
                             lr=0.01, momentum=0.9)
    shape = spec["layers"][0]["outputs"][0]
    images = (torch.rand(shape) * 2 - 1).to(args.device)
    classes = spec["layers"][-1]["outputs"][0][1]
    labels = (torch.arange(shape[0]) % classes).float().reshape(-1, 1, 1, 1).to(args.device)
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for step in range(args.warmup + args.steps):
        if step == args.warmup:
            sync()
            start = time.time()
        solver.zero_grad()
        loss = model(images, labels)
        loss.backward()
        solver.step()
    sync()
    seconds = time.time() - start
    print(f"pytorch {torch.__version__} {spec['name']} batch {shape[0]}: "
          f"{args.steps * shape[0] / seconds:.2f} images/s ({args.steps} steps in {seconds:.2f} s, "
          f"{args.device}, {args.threads} threads, last loss {float(loss):.4f})")


if __name__ == "__main__":
    main()

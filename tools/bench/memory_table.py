#!/usr/bin/env python3
"""The peak device memory of every memory mode, from `plan`, for AlexNet at
batch 200 and ResNet-50/101 at ImageNet size (batch 32), beside the figures
the SuperNeurons paper reports. Prints a Markdown table.

    /usr/bin/python3 tools/bench/memory_table.py [--plan bazel-bin/tools/plan]

Peaks are split into the persistent part (parameters and their gradients,
which stay on the device) and the transient part (activations, their
gradients, workspace) - the paper counts the latter.
"""
import argparse
import json
import subprocess

MIB = 1024 * 1024
# SuperNeurons (PPoPP'18), in MB as printed: AlexNet from Fig. 10 and §4.1.1,
# ResNets from Table 1 (peak with cost-aware recomputation, all techniques).
PAPER = {
    "alexnet": {"baseline": "2189.4", "liveness": "1489.4", "offload": "1132.2",
                "offload_recompute": "886.4", "superneurons": "886.4"},
    "resnet50": {"offload_recompute": "401", "superneurons": "401"},
    "resnet101": {"offload_recompute": "401", "superneurons": "401"},
}
NETWORKS = [("alexnet", "models/alexnet.yaml", 200), ("resnet50", "models/resnet50.yaml", 32),
            ("resnet101", "models/resnet101.yaml", 32)]
MODES = ["baseline", "liveness", "offload", "recompute", "offload_recompute", "superneurons"]


def plan(binary, config, batch, extra):
    out = subprocess.run([binary, "--config", config, "--batch", str(batch), "--json", "--timing", "model"] + extra,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["modes"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="bazel-bin/tools/plan")
    args = parser.parse_args()
    print("| network | mode | peak (MiB) | persistent | transient | to host per iteration | recomputed | paper (MB) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for name, config, batch in NETWORKS:
        rows = {m["mode"]: m for m in plan(args.plan, config, batch, ["--minimum"])}
        for mode in MODES:
            m = rows[mode]
            label = mode
            peak = m["peak_bytes"]
            if mode == "superneurons":
                # At the smallest budget it runs in; without a budget nothing moves.
                tight = plan(args.plan, config, batch, ["--memory", mode, "--device-memory",
                                                        str(m["minimum_budget_bytes"])])[0]
                m, peak, label = tight, tight["peak_bytes"], "superneurons (smallest budget)"
            print(f"| {name} b{batch} | {label} | {peak / MIB:,.1f} | {m['persistent_bytes'] / MIB:,.1f} | "
                  f"{(peak - m['persistent_bytes']) / MIB:,.1f} | {m['to_host_bytes'] / MIB:,.1f} MiB | "
                  f"{m['recomputations']} | {PAPER.get(name, {}).get(mode, '')} |")


if __name__ == "__main__":
    main()

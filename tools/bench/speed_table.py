#!/usr/bin/env python3
"""Simulated speed of every memory mode at its smallest budget, relative to the
roomy run (baseline, unlimited budget), for AlexNet at batch 200 and ResNet-50
at batch 32 (ImageNet size), on the TITAN X and H100 device profiles. Prints a
Markdown table. With --dymem: Dymem's barrier-free schedule against the
vDNN-like one and superneurons on ResNet-50 at batch 100 and Inception-v4 at
batch 128 (its paper's Fig. 13 and Fig. 12 settings), every mode at the same
budgets, on the TITAN X and V100 profiles.

    /usr/bin/python3 tools/bench/speed_table.py [--plan bazel-bin/tools/plan]
        [--profiles titanx-pcie3,h100-pcie5] [--dymem]

Every number is a simulation (plan --device-profile: the plan's event log
replayed on the profile's compute and link rates), not a measurement on
those GPUs. Convolution algorithms are chosen by modelled CPU timings
(--timing model), so the table does not depend on this machine.
"""
import argparse
import json
import subprocess

MIB = 1024 * 1024
NETWORKS = [("alexnet", "models/alexnet.yaml", 200), ("resnet50", "models/resnet50.yaml", 32)]
MODES = ["liveness", "offload", "recompute", "offload_recompute", "superneurons"]


def plan(binary, config, batch, extra):
    out = subprocess.run([binary, "--config", config, "--batch", str(batch), "--json", "--timing",
                          "model"] + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["modes"]


# Dymem (HPDC '20, Fig. 13): ResNet-50 at batch 100 on a 12 GB TITAN X over
# PCIe 3, up to 42% more images/s than vDNN. The paper does not say the
# images' size: both are shown. Its Inception-v4 runs at batch 128 (Fig. 12;
# Fig. 13 varies the batch without naming it); the paper says CIFAR-10, but
# Inception-v4 needs at least 75x75, so it runs at its own 299x299.
DYMEM_NETWORKS = [
    ("ResNet-50 b100 (CIFAR stem, 32x32)", "models/resnet50.yaml", 100,
     ["--set", "stem=cifar", "--set", "size=32", "--set", "classes=10"]),
    ("ResNet-50 b100 (224x224)", "models/resnet50.yaml", 100, []),
    ("Inception-v4 b128 (299x299)", "models/inception_v4.yaml", 128, []),
]
# (label, plan flags); the first is what the others are compared with.
DYMEM_MODES = [
    ("vdnn", ["--memory", "vdnn"]),
    ("vdnn without the barrier", ["--memory", "dymem", "--offload-set", "conv", "--release",
                                  "eager", "--prefetch", "ahead"]),
    ("dymem on vdnn's offload set", ["--memory", "dymem", "--offload-set", "conv"]),
    ("dymem", ["--memory", "dymem"]),
    ("superneurons", ["--memory", "superneurons"]),
]
TITAN_X_BYTES = 12 * 1024 * MIB


def dymem_table(binary, profiles, only=None):
    header = "| network | budget | mode | moved per iteration |"
    rule = "|---|---|---|---:|"
    for p in profiles:
        header += f" {p}: ms per iteration (compute) | images/s | vs vdnn | copies hidden |"
        rule += "---:|---:|---:|---:|"
    print(header)
    print(rule)
    for name, config, batch, sets in DYMEM_NETWORKS:
        if only and not any(word in name for word in only):
            continue
        minimum = {label: plan(binary, config, batch, sets + flags + ["--minimum"])[0]
                   .get("minimum_budget_bytes", 0) for label, flags in DYMEM_MODES}
        common = max(minimum.values())
        for budget, what in [(TITAN_X_BYTES, "12 GiB"),
                             (common, f"{common / MIB:,.1f} MiB (the largest smallest budget)")]:
            base = {}
            for label, flags in DYMEM_MODES:
                cells, moved = "", 0
                for profile in profiles:
                    m = plan(binary, config, batch, sets + flags + [
                        "--device-memory", str(budget), "--device-profile", profile])[0]
                    if not m["fits"]:
                        cells += " does not fit | | | |"
                        continue
                    p = m["prediction"]
                    moved = (m["to_host_bytes"] + m["to_device_bytes"]) / MIB
                    ips = batch / p["iteration_seconds"]
                    base.setdefault(profile, ips)
                    hidden = f"{100 * p['overlap']:.0f}%" if p["copy_seconds"] > 0 else "-"
                    cells += (f" {1e3 * p['iteration_seconds']:,.1f} "
                              f"({1e3 * p['compute_seconds']:,.1f}) | {ips:,.1f} | "
                              f"{100 * (ips / base[profile] - 1):+.0f}% | {hidden} |")
                print(f"| {name} | {what} | {label} | {moved:,.1f} MiB |{cells}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="bazel-bin/tools/plan")
    parser.add_argument("--profiles")
    parser.add_argument("--dymem", action="store_true",
                        help="Dymem against vdnn and superneurons on ResNet-50 b100 and Inception-v4 b128")
    parser.add_argument("--networks", help="with --dymem: only the rows whose network label "
                        "contains one of these comma-separated words (e.g. Inception)")
    args = parser.parse_args()
    if args.dymem:
        dymem_table(args.plan, (args.profiles or "titanx-pcie3,v100-nvlink2").split(","),
                    args.networks.split(",") if args.networks else None)
        return
    profiles = (args.profiles or "titanx-pcie3,h100-pcie5").split(",")
    header = "| network | mode | smallest budget | moved per iteration | recomputed |"
    rule = "|---|---|---:|---:|---:|"
    for p in profiles:
        header += f" {p}: ms per iteration (compute) | of roomy throughput | copies hidden |"
        rule += "---:|---:|---:|"
    print(header)
    print(rule)
    for name, config, batch in NETWORKS:
        minimum = {m["mode"]: m["minimum_budget_bytes"]
                   for m in plan(args.plan, config, batch, ["--minimum"]) if m["mode"] in MODES}
        roomy = ""
        for mode in MODES:
            row = None
            cells = ""
            roomy = f"| {name} b{batch} | roomy (baseline, unlimited budget) | | 0 | 0 |"
            for profile in profiles:
                m = plan(args.plan, config, batch, ["--memory", mode, "--device-memory",
                                                    str(minimum[mode]), "--device-profile",
                                                    profile])[0]
                row = m
                p = m["prediction"]
                hidden = f"{100 * p['overlap']:.0f}%" if p["copy_seconds"] > 0 else "-"
                cells += (f" {1e3 * p['iteration_seconds']:,.1f} ({1e3 * p['compute_seconds']:,.1f}) | "
                          f"{100 * p['relative_throughput']:.1f}% | {hidden} |")
                roomy_ms = 1e3 * p["iteration_seconds"] * p["relative_throughput"]
                roomy += f" {roomy_ms:,.1f} | 100% | - |"
            if mode == MODES[0]:
                print(roomy)
            moved = (row["to_host_bytes"] + row["to_device_bytes"]) / MIB
            print(f"| {name} b{batch} | {mode} | {minimum[mode] / MIB:,.1f} MiB | {moved:,.1f} MiB | "
                  f"{row['recomputations']} |{cells}")


if __name__ == "__main__":
    main()

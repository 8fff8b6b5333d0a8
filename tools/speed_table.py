#!/usr/bin/env python3
"""Simulated speed of every memory mode at its smallest budget, relative to the
roomy run (baseline, unlimited budget), for AlexNet at batch 200 and ResNet-50
at batch 32 (ImageNet size), on the TITAN X and H100 device profiles. Prints a
Markdown table.

    /usr/bin/python3 tools/speed_table.py [--plan bazel-bin/tools/plan]
        [--profiles titanx-pcie3,h100-pcie5]

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="bazel-bin/tools/plan")
    parser.add_argument("--profiles", default="titanx-pcie3,h100-pcie5")
    args = parser.parse_args()
    profiles = args.profiles.split(",")
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

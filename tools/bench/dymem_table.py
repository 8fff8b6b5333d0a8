#!/usr/bin/env python3
"""Allocators compared on Dymem's networks, from `plan` alone: the footprint
(the device memory the placements needed in a roomy pool) and the smallest
budget that runs, under first fit, best fit, the caching best fit
(CNMeM's and PyTorch's: segments that never merge), GTBM (strict and soft) and the
static allocator, with compaction off and memory-optimal convolutions (so
that workspace sizes do not depend on free memory), beside the ratios the
Dymem paper reports. Prints Markdown tables.

    /usr/bin/python3 tools/bench/dymem_table.py [--plan bazel-bin/tools/plan] [--quick]

Schedules: `liveness` (no offload: placement alone), `dymem` with eager
release (every offloaded block goes after its last forward use, so a roomy
pool shows the memory the schedule needs) and `dymem` as it runs (lazy
release: blocks go only under pressure, so only the smallest budget says
anything). Then the systems (vdnn with best fit against dymem with GTBM)
and Dymem's pool sizing.
"""
import argparse
import json
import subprocess

MIB = 1024 * 1024
NETWORKS = [
    ("ResNet-32 (CIFAR, no BN) b100", "models/resnet32_cifar.yaml", 100, []),
    ("Inception-v4 b128 (299x299)", "models/inception_v4.yaml", 128, []),
    ("ResNet-50 b100 (CIFAR stem, 32x32)", "models/resnet50.yaml", 100,
     ["--set", "stem=cifar", "--set", "size=32"]),
    ("AlexNet b256", "models/alexnet.yaml", 256, []),
    ("VGG-16 b64", "models/vgg16.yaml", 64, []),
]
ALLOCATORS = ["first_fit", "best_fit", "caching", "gtbm", "gtbm_soft", "static"]
SCHEDULES = [("liveness", ["--memory", "liveness"]),
             ("dymem, eager release", ["--memory", "dymem", "--release", "eager"]),
             ("dymem (lazy release)", ["--memory", "dymem"])]
# Dymem (HPDC '20): GTBM over best fit (Fig. 15), Dymem over vDNN (Fig. 12a).
PAPER_GTBM = {"ResNet-32 (CIFAR, no BN) b100": "0.74 (1854 / ~2500 MB)"}
PAPER_SYSTEM = {
    "Inception-v4 b128 (299x299)": "0.69 (2527 / 3650 MB)",
    "AlexNet b256": "~1 (+250 MB)",
    "VGG-16 b64": "~1",
}
TITAN_X = "12GiB"  # the paper's first iteration: 10 GB main + 2 GB incremental


def plan(binary, config, batch, extra):
    cmd = [binary, "--config", config, "--batch", str(batch), "--json", "--timing", "model",
           "--compact", "false", "--workspace", "memory_optimal"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["modes"][0]


def mib(b):
    return f"{b / MIB:,.1f}"


def both(r):
    return f"{mib(r['footprint_bytes'])} / {mib(r['minimum_budget_bytes'])}"


def ratio(a, b):
    return (f"{a['footprint_bytes'] / b['footprint_bytes']:.2f} / "
            f"{a['minimum_budget_bytes'] / b['minimum_budget_bytes']:.2f}")


def allocator_tables(binary, networks):
    results = {}
    for schedule, flags in SCHEDULES:
        print(f"\n**{schedule}**: footprint / smallest budget (MiB)\n")
        print("| network | max load | " + " | ".join(ALLOCATORS) +
              " | gtbm / best fit | gtbm / caching | paper |")
        print("|---|---:|" + "---:|" * len(ALLOCATORS) + "---:|---:|---|")
        for name, config, batch, extra in networks:
            rows = {a: plan(binary, config, batch, extra + flags + ["--minimum", "--allocator", a])
                    for a in ALLOCATORS}
            results[(schedule, name)] = rows
            g, b = rows["gtbm"], rows["best_fit"]
            print(f"| {name} | {mib(b['max_load_bytes'])} | " +
                  " | ".join(both(r) for r in rows.values()) +
                  f" | {ratio(g, b)} | {ratio(g, rows['caching'])} | {PAPER_GTBM.get(name, '')} |")
    return results


def system_table(binary, networks, results):
    print("\n**Systems**: footprint / smallest budget (MiB)\n")
    print("| network | vdnn (best fit) | vdnn (caching) | dymem eager (gtbm) | dymem lazy (gtbm) | "
          "dymem eager / vdnn (best fit) | dymem eager / vdnn (caching) | paper, Dymem / vDNN |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name, config, batch, extra in networks:
        v = plan(binary, config, batch, extra + ["--memory", "vdnn", "--minimum"])
        c = plan(binary, config, batch,
                 extra + ["--memory", "vdnn", "--minimum", "--allocator", "caching"])
        e = results[("dymem, eager release", name)]["gtbm"]
        l = results[("dymem (lazy release)", name)]["gtbm"]
        print(f"| {name} | {both(v)} | {both(c)} | {both(e)} | {both(l)} | {ratio(e, v)} | "
              f"{ratio(e, c)} | {PAPER_SYSTEM.get(name, '')} |")


def sizing_table(binary, networks):
    print(f"\n**Pool sizing** (gtbm, profiled in {TITAN_X}, beta 300 MiB; MiB)\n")
    print("| network | release | squeeze gap | sized pool | runs | without beta | exact minimum "
          "| slack | smallest beta |")
    print("|---|---|---:|---:|---|---:|---:|---:|---:|")
    for name, config, batch, extra in networks:
        for release in ("eager", "lazy"):
            r = plan(binary, config, batch, extra + ["--memory", "dymem", "--release", release,
                                                     "--device-memory", TITAN_X, "--size-pool"])
            if not r["fits"]:
                print(f"| {name} | {release} | does not fit in {TITAN_X} | | | | | | |")
                continue
            s = r["pool_sizing"]
            print(f"| {name} | {release} | {mib(s['squeeze_gap_bytes'])} | {mib(s['pool_bytes'])} | "
                  f"{'yes' if s['runs'] else 'no'} | {mib(s['squeezed_bytes'])} | "
                  f"{mib(s['minimum_budget_bytes'])} | "
                  f"{mib(s['squeezed_bytes'] - s['minimum_budget_bytes'])} | "
                  f"{mib(s['smallest_beta_bytes'])} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", default="bazel-bin/tools/plan")
    parser.add_argument("--quick", action="store_true", help="ResNet-32 only")
    args = parser.parse_args()
    networks = NETWORKS[:1] if args.quick else NETWORKS
    results = allocator_tables(args.plan, networks)
    system_table(args.plan, networks, results)
    sizing_table(args.plan, networks)


if __name__ == "__main__":
    main()

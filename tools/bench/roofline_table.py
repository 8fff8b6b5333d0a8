#!/usr/bin/env python3
"""The roofline table of tools/bench/roofline.sh, from the outputs it saved.

Reads DIR/roofline (bench_roofline), DIR/spill (bench_train --profile),
DIR/pytorch (bench_torch.py) and DIR/load, and prints markdown: the
machine's peaks, each layer type's share of spill's step and its achieved
fraction of the peak that bounds it (arithmetic for convolution and fully
connected layers, memory bandwidth for the rest), and each framework's
training throughput as a fraction of the FMA peak.

    python3 tools/bench/roofline_table.py DIR MODEL
"""
import os
import re
import sys

# Layer types whose work is arithmetic; the others are bound by memory.
COMPUTE_BOUND = {"convolution", "fully_connected"}
# The buffer size whose bandwidth bounds the memory-bound layers: one
# ResNet-18 activation at batch 64.
BANDWIDTH_SIZE_MIB = 16


def read(path):
    with open(path) as f:
        return f.read()


def number(pattern, text, what):
    m = re.search(pattern, text)
    if not m:
        sys.exit(f"roofline_table: no {what} in the output:\n{text}")
    return float(m.group(1))


def profile_rows(spill):
    """layer type -> (wall s, cpu s) from the profile table, and -> (GFLOP/s,
    GB/s) from the work table."""
    times, work = {}, {}
    for line in spill.splitlines():
        cells = line.split()
        if len(cells) == 7 and cells[3].endswith("%") and cells[0] != "layer":
            times[cells[0]] = (float(cells[1]) + float(cells[2]), float(cells[4]) + float(cells[5]))
        if len(cells) == 6 and cells[0] != "layer":
            try:
                work[cells[0]] = (float(cells[3]), float(cells[4]))
            except ValueError:
                pass
    return times, work


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[-1].strip())
    d, model = sys.argv[1], sys.argv[2]
    roof, spill, torch_out = (read(os.path.join(d, n)) for n in ("roofline", "spill", "pytorch"))
    load = read(os.path.join(d, "load")).strip()
    peak = number(r"fma_peak ([0-9.]+) GFLOP/s", roof, "FMA peak")
    bandwidth = number(rf"bandwidth {BANDWIDTH_SIZE_MIB} MiB: read ([0-9.]+) GB/s", roof,
                       "bandwidth")
    dram = number(r"bandwidth 1024 MiB: read ([0-9.]+) GB/s", roof, "memory bandwidth")
    per_image = number(r"training work: ([0-9.]+) GFLOP per image", spill, "work per image")
    ours = number(r": ([0-9.]+) images/s", spill, "spill images/s")
    theirs = number(r": ([0-9.]+) images/s", torch_out, "PyTorch images/s")
    times, work = profile_rows(spill)
    total = sum(t[0] for t in times.values()) or 1
    print(f"\n{model}, load average {load} at the start\n")
    print(f"FMA peak {peak:.0f} GFLOP/s; read bandwidth {bandwidth:.0f} GB/s over "
          f"{BANDWIDTH_SIZE_MIB} MiB, {dram:.0f} GB/s over 1 GiB; "
          f"training work {per_image:.2f} GFLOP per image\n")
    print("| framework | images/s | GFLOP/s | fraction of FMA peak |")
    print("|---|---:|---:|---:|")
    for name, rate in (("spill", ours), ("PyTorch", theirs)):
        print(f"| {name} | {rate:.1f} | {rate * per_image:.0f} | {rate * per_image / peak:.0%} |")
    print(f"\nspill / PyTorch: {ours / theirs:.2f}\n")
    print("| layer type | share of spill's step | GFLOP/s | GB/s | bound | fraction of the bound |")
    print("|---|---:|---:|---:|---|---:|")
    for kind, (wall, _) in sorted(times.items(), key=lambda kv: -kv[1][0]):
        gflops, gbs = work.get(kind, (0.0, 0.0))
        if kind in COMPUTE_BOUND:
            bound, fraction = "FMA peak", gflops / peak
        else:
            bound, fraction = f"bandwidth ({BANDWIDTH_SIZE_MIB} MiB)", gbs / bandwidth
        print(f"| {kind} | {wall / total:.1%} | {gflops:.0f} | {gbs:.1f} | {bound} | {fraction:.0%} |")


if __name__ == "__main__":
    main()

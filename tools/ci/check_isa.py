#!/usr/bin/env python3
"""Finds AVX-512 instructions in x86-64 binaries, with objdump.

A binary built with -march=native on an AVX-512 machine dies with SIGILL on
one without; the GPU bundle is built for x86-64-v3 (AVX2, FMA) instead, and
this check proves it. An instruction counts as AVX-512 when it is
EVEX-encoded (its first byte after any legacy prefixes is 0x62, which in
64-bit mode is nothing else), or when it names a zmm register, an opmask
register (%k0-%k7: the VEX-encoded k* instructions), or an xmm/ymm register
above 15.

    python3 tools/ci/check_isa.py BINARY...            # exit 1 if any has AVX-512
    python3 tools/ci/check_isa.py --report-only LIB... # say so, exit 0

Libraries that choose their code at run time by the processor (oneDNN,
OpenBLAS) hold AVX-512 paths they never take elsewhere: report them only.
"""
import argparse
import re
import subprocess
import sys

LEGACY_PREFIXES = {0xF0, 0xF2, 0xF3, 0x2E, 0x36, 0x3E, 0x26, 0x64, 0x65, 0x66, 0x67}
AVX512_OPERAND = re.compile(r"%zmm\d|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|\{1to\d+\}")
LINE = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+)\t(.*)$")


def is_evex(raw):
    """True when the instruction bytes `raw` (hex pairs) are EVEX-encoded."""
    for pair in raw.split():
        byte = int(pair, 16)
        if byte in LEGACY_PREFIXES:
            continue
        return byte == 0x62
    return False


def scan(path):
    """(number of instructions, [AVX-512 ones as 'address: text'])."""
    try:
        text = subprocess.run(["objdump", "-d", "-w", path], check=True, capture_output=True,
                              text=True, errors="replace").stdout
    except FileNotFoundError:
        sys.exit("check_isa: objdump is not installed (binutils)")
    except subprocess.CalledProcessError as e:
        sys.exit(f"check_isa: objdump failed on {path}: {e.stderr.strip()}")
    count, found = 0, []
    for line in text.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        count += 1
        address, raw, instruction = m.groups()
        if is_evex(raw) or AVX512_OPERAND.search(instruction):
            found.append(f"{address}: {instruction.strip()}")
    return count, found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--report-only", action="store_true",
                        help="report AVX-512 instructions without failing")
    parser.add_argument("binaries", nargs="+")
    args = parser.parse_args()
    failed = False
    for path in args.binaries:
        count, found = scan(path)
        if count == 0:
            print(f"{path}: no instructions found (not an x86-64 binary?)")
            failed = failed or not args.report_only
        elif found:
            print(f"{path}: {len(found)} AVX-512 instructions of {count}, e.g.")
            for example in found[:5]:
                print(f"    {example}")
            failed = failed or not args.report_only
        else:
            print(f"{path}: no AVX-512 in {count} instructions")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

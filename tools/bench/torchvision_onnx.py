#!/usr/bin/env python3
"""Every torchvision classification CNN through ONNX into spill, against PyTorch.

For each classification model of torchvision.models (the CNNs and the
transformers: ViT, Swin, MaxViT) this builds it with random weights (batch
norm statistics, scales, ConvNeXt's layer scales and the parameters that
start at zero - ViT's classifier and class token - drawn away from their
initial values, so every term counts), exports it as a user would - torch.onnx.export, opset 13, a
dynamic batch axis, batch norm kept as its own node (eval mode,
TrainingMode.PRESERVE) - computes PyTorch's scores for two random images,
and runs bench_onnx, which imports the file into spill and compares spill's
scores on the same images. A model matches when the largest difference is
within 1e-5 of the largest score.

    bash tools/setup.sh --bench                   # python3-torch, -torchvision, -onnx
    bazel build //tools/bench:bench_onnx
    python3 tools/bench/torchvision_onnx.py --markdown table.md
    python3 tools/bench/torchvision_onnx.py --models mobilenet_v2,convnext_tiny

The ONNX files go to a folder per model in a temporary folder (or --work),
deleted after the model; a model past protobuf's 2 GB limit is written by
PyTorch as ONNX external data (one file per tensor beside the model), which
spill reads. Images are 224x224 (299x299 for Inception-v3).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np
import torch
import torchvision

TOLERANCE = 1e-5  # of the largest score
EXCLUDED = ()  # every classifier
BATCH = 2


def Models():
    names = torchvision.models.list_models(module=torchvision.models)
    return [n for n in names if not n.startswith(EXCLUDED)]


def Randomize(model, generator):
    """Moves statistics and affine parameters off their initial values."""
    def uniform(t, low, high):
        with torch.no_grad():
            t.copy_(torch.rand(t.shape, generator=generator) * (high - low) + low)
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            uniform(m.running_mean, -0.2, 0.2)
            uniform(m.running_var, 0.5, 1.5)
            if m.affine:
                uniform(m.weight, 0.5, 1.5)
                uniform(m.bias, -0.2, 0.2)
        elif isinstance(m, torch.nn.LayerNorm) and m.elementwise_affine:
            uniform(m.weight, 0.5, 1.5)
            uniform(m.bias, -0.2, 0.2)
        if isinstance(getattr(m, "layer_scale", None), torch.nn.Parameter):
            uniform(m.layer_scale, 0.5, 1.0)
    for p in model.parameters():  # zero-initialized: ViT's classifier and class token
        if not p.detach().any():
            uniform(p, -0.05, 0.05)


def ExportZeroInPlace():
    """Swin V2 zeroes its keys' bias in place (qkv_bias[C:2C].zero_()), which
    PyTorch 1.13's exporter has no symbolic for (aten::zero): written as
    x - x, what a user adds to export it."""
    torch.onnx.register_custom_op_symbolic("aten::zero", lambda g, x: g.op("Sub", x, x), 13)


def Export(name, folder):
    """Writes NAME.onnx and NAME.npz (input, PyTorch's output) into folder."""
    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).eval()
    Randomize(model, torch.Generator().manual_seed(1))
    size = 299 if name == "inception_v3" else 224
    x = torch.randn(BATCH, 3, size, size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        y = model(x)
    params = sum(p.numel() for p in model.parameters())
    onnx_path = os.path.join(folder, name + ".onnx")
    torch.onnx.export(model, x, onnx_path, opset_version=13, input_names=["input"],
                      output_names=["scores"],
                      dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"}},
                      training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=True)
    np.savez(os.path.join(folder, name + ".npz"), input=x.numpy(), output=y.numpy())
    return onnx_path, params


def Check(name, folder, binary):
    row = {"model": name}
    start = time.time()
    folder = os.path.join(folder, name)  # the model and any external data files
    os.makedirs(folder, exist_ok=True)
    try:
        try:
            onnx_path, row["params"] = Export(name, folder)
        except Exception as e:  # an operator PyTorch cannot export, ...
            row["status"] = "not exported: " + str(e).splitlines()[0][:120]
            return row
        row["export_seconds"] = time.time() - start
        run = subprocess.run([binary, "--onnx", onnx_path, "--reference",
                              os.path.join(folder, name + ".npz")],
                             capture_output=True, text=True, timeout=3600)
    finally:
        shutil.rmtree(folder)
    if run.returncode != 0:
        row["status"] = "import failed: " + (run.stderr.strip() or run.stdout.strip())[:400]
        return row
    report = json.loads(run.stdout.strip().splitlines()[-1])
    report.pop("model")
    row.update(report)
    row["status"] = "match" if row["max_error"] <= TOLERANCE else "differs"
    return row


def Markdown(rows):
    lines = ["| model | parameters | spill layers | max error / largest score | import s | "
             "forward s (batch 2, CPU) | result |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        if "max_error" in r:
            lines.append(f"| {r['model']} | {r['params'] / 1e6:.1f} M | {r['layers']} | "
                         f"{r['max_error']:.1e} | {r['import_seconds']:.1f} | "
                         f"{r['forward_seconds']:.1f} | {r['status']} |")
        else:
            params = f"{r['params'] / 1e6:.1f} M" if "params" in r else ""
            lines.append(f"| {r['model']} | {params} | | | | | {r['status']} |")
    matched = sum(r["status"] == "match" for r in rows)
    lines.append("")
    lines.append(f"{matched} of {len(rows)} models match PyTorch within {TOLERANCE:g} of the "
                 f"largest score (torch {torch.__version__}, torchvision "
                 f"{torchvision.__version__}).")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: every CNN)")
    parser.add_argument("--bin", default="bazel-bin/tools/bench/bench_onnx")
    parser.add_argument("--work", help="folder for the ONNX files (default: a temporary one)")
    parser.add_argument("--markdown", help="write the result table here")
    parser.add_argument("--json", help="write every row as JSON lines here")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    ExportZeroInPlace()
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    names = args.models.split(",") if args.models else Models()
    unknown = sorted(set(names) - set(torchvision.models.list_models()))
    if unknown:
        sys.exit(f"torchvision_onnx.py: unknown models: {', '.join(unknown)}")
    if not os.path.exists(args.bin):
        sys.exit(f"torchvision_onnx.py: {args.bin} not found; bazel build //tools/bench:bench_onnx")
    rows = []
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.work or temporary
        os.makedirs(folder, exist_ok=True)
        for name in names:
            row = Check(name, folder, args.bin)
            rows.append(row)
            print(json.dumps(row), flush=True)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
    table = Markdown(rows)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(table + "\n")
    return 0 if all(r["status"] == "match" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

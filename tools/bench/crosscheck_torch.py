#!/usr/bin/env python3
"""Cross-checks spill's training against PyTorch.

Replays a trace recorded by `train --trace DIR` in PyTorch: the same network
(rebuilt from DIR/net.json), the same initial weights (DIR/initial.npz), the
same batches and learning rates (DIR/trace.npz) and the same solver
(DIR/solver.json), then compares the losses step by step.

The replay runs twice: in float64, the reference, and in float32, as PyTorch
normally trains. The first step's parameter gradients (DIR/gradients.npz)
are compared tensor by tensor as well: they are free of the drift below.
Rounding differences grow as training goes on (PyTorch in float32 drifts
from its own float64 replay, and from itself with another thread count), so
spill is judged against the float64 replay, over the steps in which
PyTorch's float32 replay still agrees with it; the float32 column shows how
far PyTorch itself strays.

    bazel-bin/tools/train --config configs/lenet_fashion.yaml --max-steps 20 --trace /tmp/trace
    /usr/bin/python3 tools/bench/crosscheck_torch.py /tmp/trace

PyTorch is an optional tool here (Debian's python3-torch, installed by
`tools/setup.sh --bench`); it is never a dependency of spill. Dropout draws
different masks in the two frameworks, so traced networks must not drop
units (ratio 0 or no dropout layers).
"""
import argparse
import json
import os
import sys

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("crosscheck_torch: PyTorch is not installed (bash tools/setup.sh --bench)")


def pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


class Replica(torch.nn.Module):
    """The traced network as a PyTorch module, layer by layer in route order."""

    def __init__(self, spec, weights, dtype, device="cpu", random_dropout=False):
        """random_dropout: drop units with masks of PyTorch's own drawing
        (for timing; a cross-check cannot match spill's masks)."""
        super().__init__()
        self.spec = spec
        self.random_dropout = random_dropout
        self.params = torch.nn.ParameterDict()
        self.buffers_ = {}
        self.groups = {"decay": [], "no_decay": []}
        for layer in spec["layers"]:
            for t in layer["tensors"]:
                value = torch.tensor(weights["params/" + t["name"]].reshape(t["shape"])).to(device=device, dtype=dtype)
                key = t["name"].replace("/", "__").replace(".", "_")
                if t["trainable"]:
                    p = torch.nn.Parameter(value)
                    self.params[key] = p
                    self.groups["decay" if t["decay_mult"] > 0 else "no_decay"].append(p)
                else:
                    self.buffers_[key] = value

    def tensor(self, name):
        key = name.replace("/", "__").replace(".", "_")
        return self.params[key] if key in self.params else self.buffers_[key]

    def forward(self, images, labels, dropped=None):
        """dropped: per layer (net.json's order) the input stochastic depth
        left out of this step, or -1 (trace.npz's `dropped` row)."""
        values = {}
        loss = None
        for index, layer in enumerate(self.spec["layers"]):
            name, kind, p = layer["name"], layer["type"], layer["params"]
            xs = [values[(src, out)] for src, out in layer["inputs"]]
            if kind == "input":
                values[(name, 0)], values[(name, 1)] = images, labels
                continue
            if kind == "add" and dropped is not None and dropped[index] >= 0:
                # The branch is left out; times zero, its parameters get zero
                # gradients (as spill gives them), not none.
                branch = int(dropped[index])
                others = xs[:branch] + xs[branch + 1:]
                values[(name, 0)] = sum(others[1:], others[0]) + 0.0 * xs[branch]
                continue
            if kind == "add" and p.get("survival", 1) < 1 and dropped is None:
                raise SystemExit(f"crosscheck_torch: layer {name} drops its branch but the trace has no drop pattern")
            y = self.apply(layer, kind, p, xs)
            if kind == "softmax_loss":
                loss = y if loss is None else loss + y
            if isinstance(y, tuple):  # a second output (a recurrent layer's final states)
                values[(name, 0)], values[(name, 1)] = y
            else:
                values[(name, 0)] = y
        return loss

    def apply(self, layer, kind, p, xs):
        name = layer["name"]
        x = xs[0]
        if kind == "convolution":
            bias = self.tensor(name + "/bias").reshape(-1) if p.get("bias", True) else None
            return F.conv2d(x, self.tensor(name + "/weight"), bias, pair(p.get("stride", 1)),
                            pair(p.get("pad", 0)), pair(p.get("dilation", 1)), p.get("groups", 1))
        if kind == "fully_connected":
            w = self.tensor(name + "/weight")
            bias = self.tensor(name + "/bias").reshape(-1) if p.get("bias", True) else None
            return F.linear(x.reshape(x.shape[0], -1), w.reshape(w.shape[0], -1), bias).reshape(x.shape[0], -1, 1, 1)
        if kind == "relu":
            slope = p.get("negative_slope", 0.0)
            return F.leaky_relu(x, slope) if slope else F.relu(x)
        if kind == "max_pool":
            k = pair(p["kernel"])
            return F.max_pool2d(x, k, pair(p.get("stride", p["kernel"])), pair(p.get("pad", 0)),
                                ceil_mode=p.get("ceil_mode", False))
        if kind == "avg_pool":
            k = pair(p["kernel"])
            return F.avg_pool2d(x, k, pair(p.get("stride", p["kernel"])), pair(p.get("pad", 0)),
                                ceil_mode=p.get("ceil_mode", False),
                                count_include_pad=p.get("count_include_pad", True))
        if kind == "global_avg_pool":
            return x.mean(dim=(2, 3), keepdim=True)
        if kind == "tokens":  # an image's pixels as a sequence, row after row
            return x.reshape(x.shape[0], x.shape[1], 1, -1)
        if kind == "class_token":  # a learned token before every sequence
            token = self.tensor(name + "/token")
            return torch.cat([token.expand(x.shape[0], -1, -1, -1), x], dim=3)
        if kind == "token":  # one position of each sequence
            i = p.get("index", 0) % x.shape[3]
            return x[:, :, :, i:i + 1]
        if kind == "batch_norm":
            return F.batch_norm(x, self.tensor(name + "/running_mean").reshape(-1),
                                self.tensor(name + "/running_var").reshape(-1),
                                self.tensor(name + "/gamma").reshape(-1), self.tensor(name + "/beta").reshape(-1),
                                training=True, momentum=p.get("momentum", 0.1), eps=p.get("eps", 1e-5))
        if kind == "lrn":
            return F.local_response_norm(x, p.get("size", 5), p.get("alpha", 1e-4), p.get("beta", 0.75),
                                         p.get("k", 1.0))
        if kind == "dropout":
            if p.get("ratio", 0.5) != 0 and self.random_dropout:
                return F.dropout(x, p.get("ratio", 0.5), training=True)
            if p.get("ratio", 0.5) != 0:
                raise SystemExit(f"crosscheck_torch: layer {name} drops units; masks cannot match")
            return x
        if kind == "concat":
            return torch.cat(xs, dim=1)
        if kind == "slice":
            return x[:, p["begin"]:p["end"]]
        if kind == "add":
            return sum(xs[1:], xs[0])
        if kind == "embedding":
            n, t = x.shape[0], x.shape[3]
            table = self.tensor(name + "/weight")
            return F.embedding(x.reshape(n, t).long(), table.reshape(table.shape[0], -1)).permute(0, 2, 1).reshape(n, -1, 1, t)
        if kind == "layer_norm":  # over each pixel's channels
            y = F.layer_norm(x.permute(0, 2, 3, 1), (x.shape[1],), self.tensor(name + "/gamma").reshape(-1),
                             self.tensor(name + "/beta").reshape(-1), p.get("eps", 1e-5))
            return y.permute(0, 3, 1, 2)
        if kind == "gelu":
            return F.gelu(x)
        if kind == "positions":
            return x + self.tensor(name + "/table")[..., :x.shape[3]]
        if kind == "attention":
            return self.attention(p, x)
        if kind in ("lstm", "gru"):
            return self.recurrent(name, kind, p, x, xs[1] if len(xs) > 1 else None)
        if kind == "softmax_loss":
            labels, ignored = xs[-1], p.get("ignore_label", -100)  # PyTorch's ignore_index
            weight = p.get("weight", 1.0)
            if labels[0].numel() > 1:  # a class per pixel (or per step of a sequence)
                target = labels.reshape(x.shape[0], x.shape[2], x.shape[3]).long()
                return F.cross_entropy(x, target, ignore_index=ignored) * weight
            return F.cross_entropy(x.reshape(x.shape[0], -1), labels.reshape(-1).long(), ignore_index=ignored) * weight
        raise SystemExit(f"crosscheck_torch: layer type {kind} is not supported")


    def attention(self, p, x):
        """Queries, keys and values stacked along the channels (N x 3C x 1 x T),
        split into heads; PyTorch's matrix products and softmax."""
        n, c, t = x.shape[0], x.shape[1] // 3, x.shape[3]
        heads = p["heads"]
        d = c // heads
        q, k, v = (x[:, i * c:(i + 1) * c].reshape(n, heads, d, t).transpose(2, 3) for i in range(3))
        scores = q @ k.transpose(2, 3) / float(d) ** 0.5
        if p.get("causal", False):
            mask = torch.ones(t, t, dtype=torch.bool).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        y = torch.softmax(scores, dim=-1) @ v
        return y.transpose(2, 3).reshape(n, c, 1, t)

    def recurrent(self, name, kind, p, x, initial=None):
        """PyTorch's own LSTM / GRU kernels (those nn.LSTM and nn.GRU call), with
        the traced weights: per layer and direction w_ih, w_hh, b_ih, b_hh.
        States as values (initial: input, final: true) are N x S x 1 x 1 per
        image: the hidden states of every layer and direction, then the cells."""
        if p.get("dropout", 0.0) != 0:
            raise SystemExit(f"crosscheck_torch: layer {name} drops units; masks cannot match")
        n, c, t = x.shape[0], x.shape[1], x.shape[3]
        layers, hidden = p.get("layers", 1), p["hidden"]
        directions = 2 if p.get("bidirectional", False) else 1
        bias = p.get("bias", True)
        weights = []
        for layer in range(layers):
            for d in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if d else "")
                names = ["weight_ih", "weight_hh"] + (["bias_ih", "bias_hh"] if bias else [])
                for w in names:
                    value = self.tensor(f"{name}/{w}{suffix}")
                    weights.append(value.reshape(value.shape[0], -1) if w.startswith("weight") else value.reshape(-1))
        seq = x.reshape(n, c, t).permute(0, 2, 1)
        blocks = layers * directions
        h0 = c0 = torch.zeros(blocks, n, hidden, dtype=x.dtype)
        if initial is not None:  # per image [h of every block, c of every block]
            states = initial.reshape(n, -1, blocks, hidden).permute(1, 2, 0, 3)
            h0 = states[0].contiguous()
            c0 = states[1].contiguous() if kind == "lstm" else c0
        if kind == "lstm":
            y, hn, cn = torch._VF.lstm(seq, (h0, c0), weights, bias, layers, 0.0, True, directions == 2, True)
            final = [hn, cn]
        else:
            y, hn = torch._VF.gru(seq, h0, weights, bias, layers, 0.0, True, directions == 2, True)
            final = [hn]
        y = y.permute(0, 2, 1).reshape(n, -1, 1, t)
        if not p.get("final", False):
            return y
        return y, torch.cat([s.permute(1, 0, 2).reshape(n, -1) for s in final], dim=1).reshape(n, -1, 1, 1)


def make_solver(config, model):
    groups = [{"params": model.groups["decay"], "weight_decay": config["weight_decay"]},
              {"params": model.groups["no_decay"], "weight_decay": 0.0}]
    if config["type"] == "adam":
        return torch.optim.Adam(groups, lr=1.0, betas=(config["beta1"], config["beta2"]), eps=config["epsilon"])
    return torch.optim.SGD(groups, lr=1.0, momentum=config["momentum"], nesterov=config["nesterov"])


def dropped_row(trace, step):
    """The step's stochastic-depth pattern, when the network has one."""
    return trace["dropped"][step] if "dropped" in trace.files else None


def batch(trace, step, dtype):
    """The step's images and labels, cut to the length the step ran at
    when the run grouped its sequences by length (data.buckets)."""
    images, labels = trace["images"][step], trace["labels"][step]
    if "lengths" in trace.files:
        length = int(trace["lengths"][step])
        images, labels = images[..., :length], labels[..., :length]
    return torch.tensor(np.ascontiguousarray(images)).to(dtype), torch.tensor(np.ascontiguousarray(labels))


def replay(spec, solver_config, weights, trace, dtype):
    model = Replica(spec, weights, dtype)
    solver = make_solver(solver_config, model)
    losses = []
    for step in range(len(trace["loss"])):
        for group in solver.param_groups:
            group["lr"] = float(trace["lr"][step])
        solver.zero_grad()
        loss = model(*batch(trace, step, dtype), dropped_row(trace, step))
        loss.backward()
        solver.step()
        losses.append(float(loss))
    return losses


def gradient_errors(spec, weights, trace, grads):
    """Relative L2 error of the first step's gradients, per parameter tensor,
    of spill and of PyTorch float32, both against the float64 replay."""
    results = {}
    for dtype in (torch.float64, torch.float32):
        model = Replica(spec, weights, dtype)
        model(*batch(trace, 0, dtype), dropped_row(trace, 0)).backward()
        results[dtype] = model
    rows = []
    for layer in spec["layers"]:
        for t in layer["tensors"]:
            if not t["trainable"]:
                continue
            ref = results[torch.float64].tensor(t["name"]).grad.numpy().ravel()
            fp32 = results[torch.float32].tensor(t["name"]).grad.numpy().ravel().astype(np.float64)
            ours = grads[t["name"]].ravel().astype(np.float64)
            norm = max(np.linalg.norm(ref), 1e-30)
            rows.append((np.linalg.norm(ours - ref) / norm, np.linalg.norm(fp32 - ref) / norm, t["name"]))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="directory written by train --trace")
    parser.add_argument("--tolerance", type=float, default=1e-4,
                        help="largest relative difference from the float64 replay (default 1e-4)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with open(os.path.join(args.trace, "net.json")) as f:
        spec = json.load(f)
    with open(os.path.join(args.trace, "solver.json")) as f:
        solver_config = json.load(f)
    weights = np.load(os.path.join(args.trace, "initial.npz"))
    trace = np.load(os.path.join(args.trace, "trace.npz"))
    reference = replay(spec, solver_config, weights, trace, torch.float64)
    single = replay(spec, solver_config, weights, trace, torch.float32)
    print(f"{spec['name']}: {len(reference)} steps, batch {spec['batch']}, solver {solver_config['type']}")
    print(f"{'step':>5} {'spill':>12} {'torch fp64':>12} {'torch fp32':>12} {'spill diff':>11} {'fp32 diff':>10}")
    # Steps are judged while PyTorch float32 itself stays within the
    # tolerance of the float64 replay; later, rounding has compounded in
    # both frameworks (a ReLU mask flips) and no float32 run can match.
    judged, ok, worst = 0, True, 0.0
    for step, (ref, fp32) in enumerate(zip(reference, single)):
        ours = float(trace["loss"][step])
        diff = abs(ours - ref) / max(abs(ref), 1e-12)
        diff_fp32 = abs(fp32 - ref) / max(abs(ref), 1e-12)
        if step == judged and (diff_fp32 <= args.tolerance or step == 0):
            judged += 1
            worst = max(worst, diff)
            ok = ok and diff <= args.tolerance
        print(f"{step + 1:>5} {ours:>12.7f} {ref:>12.7f} {fp32:>12.7f} {diff:>11.2e} {diff_fp32:>10.2e}")
    print(f"losses: {'agree' if ok else 'DISAGREE'} over the first {judged} steps, while PyTorch float32 "
          f"agrees with float64 (largest difference {worst:.2e}, tolerance {args.tolerance:g})")
    grads_path = os.path.join(args.trace, "gradients.npz")
    if os.path.exists(grads_path):
        rows = gradient_errors(spec, weights, trace, np.load(grads_path))
        ours = np.array([r[0] for r in rows])
        theirs = np.array([r[1] for r in rows])
        print(f"first-step gradients of {len(rows)} tensors, relative L2 error from the float64 replay:")
        print(f"  spill: median {np.median(ours):.2e}, largest {ours.max():.2e} "
              f"({max(rows)[2]})")
        print(f"  PyTorch float32: median {np.median(theirs):.2e}, largest {theirs.max():.2e}")
        grads_ok = np.median(ours) <= args.tolerance
        print(f"  gradients {'agree' if grads_ok else 'DISAGREE'} (median within {args.tolerance:g})")
        ok = ok and grads_ok
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

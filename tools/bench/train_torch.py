#!/usr/bin/env python3
"""Trains a spill training config in PyTorch, for results beside spill's.

The network and its initial weights come from a trace of the config
(`train --trace DIR`, one step is enough): DIR/net.json rebuilt layer by
layer by crosscheck_torch.py's Replica, DIR/initial.npz, and spill's solver
settings, DIR/solver.json. The rest comes from the config: the dataset, read
as spill reads it (the same vocabulary, held-out split, windows and pixel
normalization), the batch, the learning rate and its schedule, the epochs
(or steps) and the evaluations (every run.eval_every steps, else at the end
of each epoch, and at the end). Each epoch's order is spill's own shuffle
(the same permutation from run.seed), so the two runs see the same batches;
the first batches are checked against the trace's.

    bazel-bin/tools/train --config configs/gpt_char.yaml --max-steps 1 --trace /tmp/tt_gpt --output /tmp/tt_gpt_run --overwrite
    /usr/bin/python3 tools/bench/train_torch.py /tmp/tt_gpt --config configs/gpt_char.yaml --json gpt_torch.json
    /usr/bin/python3 tools/bench/train_torch.py /tmp/tt_vit --config configs/vit_fashion.yaml --max-steps 30

Without --config, the config recorded in the trace is used. Training runs in
float32 on the CPU with --threads threads (2 by default). Times: the
training steps alone (a batch's assembly from the preloaded data, forward,
backward and update), as spill's images per second counts them, and the
evaluations apart. The test loss is the mean cross-entropy per label (per
character for text: nats per character) and the accuracy the share of
labels whose highest score is the label, as spill's evaluation counts them.

What differs from spill: rounding (PyTorch's float32 kernels, another
summation order), so the runs drift apart slowly, as crosscheck_torch.py
shows; dropout's masks, which are PyTorch's own draws; the network is
PyTorch's functional ops as the Replica applies them (1x1 convolutions for
the transformers' linear layers, attention by matrix products), not
torch.nn's modules. Supported datasets: fashion_mnist and mnist without
crops, padding or flips (a normalization's mean and std may be given), and
text without streams. Batch norm evaluates with PyTorch's running
statistics; stochastic depth is not replayed.

PyTorch (Debian's python3-torch, installed by `tools/setup.sh --bench`) and
PyYAML (Debian's python3-yaml) are optional tools here; neither is a
dependency of spill.
"""
import argparse
import bisect
import gzip
import json
import math
import os
import struct
import sys
import time

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    sys.exit("train_torch: PyTorch is not installed (bash tools/setup.sh --bench)")
try:
    import yaml
except ImportError:
    sys.exit("train_torch: PyYAML is not installed (apt-get install python3-yaml)")

from bench_torch import load_replica  # noqa: E402  (crosscheck_torch.py's Replica, beside this file)

# data/dataset.h and data/idx_dataset.cc: the idx kinds' normalization.
IDX_NORMALIZATION = {"fashion_mnist": (0.2860, 0.3530), "mnist": (0.1307, 0.3081)}
SHUFFLE_STREAM = 1  # data/loader.cc, kShuffleStream


def scoring_replica(crosscheck):
    """The Replica, keeping the scores its first loss layer reads; out of
    training mode, dropout passes its input and batch norm uses its running
    statistics."""

    class Scoring(crosscheck.Replica):
        scores = None

        def apply(self, layer, kind, p, xs):
            if kind == "softmax_loss" and self.scores is None:
                self.scores = xs[0]
            if not self.training and kind == "dropout":
                return xs[0]
            if not self.training and kind == "batch_norm":
                name = layer["name"]
                return F.batch_norm(xs[0], self.tensor(name + "/running_mean").reshape(-1),
                                    self.tensor(name + "/running_var").reshape(-1),
                                    self.tensor(name + "/gamma").reshape(-1),
                                    self.tensor(name + "/beta").reshape(-1),
                                    training=False, eps=p.get("eps", 1e-5))
            return super().apply(layer, kind, p, xs)

        def forward(self, images, labels, dropped=None):
            self.scores = None
            return super().forward(images, labels, dropped)

    return Scoring


# --- The config ---------------------------------------------------------------

def read_config(args, weights):
    """The config's sections and its folder (spill resolves relative paths
    beside the config first)."""
    recorded = bytes(weights["meta/config"]).decode() if "meta/config" in weights.files else None
    if args.config is None:
        if recorded is None:
            sys.exit(f"train_torch: {args.trace}/initial.npz records no config; give --config")
        text, base = recorded, "."
    else:
        with open(args.config) as f:
            text = f.read()
        base = os.path.dirname(args.config) or "."
        if recorded is not None and recorded != text:
            print(f"train_torch: note: {args.config} is not the config the trace was recorded with",
                  file=sys.stderr)
    config = yaml.safe_load(text) or {}
    return config, base


def number(section, key, default):
    """A number of the config (YAML 1.1 reads 1e-3 as a string)."""
    value = section.get(key, default)
    return float(value) if isinstance(value, str) else value


def resolve(path, base):
    if not path or os.path.isabs(path):
        return path
    beside = os.path.join(base, path)
    return os.path.normpath(beside) if os.path.exists(beside) else path


# --- spill's shuffle (data/loader.cc, framework/base/random.h) ----------------

def mix64(x):
    """SplitMix64's finalizer on uint64 arrays (wrapping like C++)."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9e3779b97f4a7c15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
    return x ^ (x >> np.uint64(31))


def mix_seed(seed, stream):
    return mix64(seed ^ mix64(stream + np.uint64(1)))


def permutation(n, seed, epoch):
    """Loader::Permutation: Fisher-Yates, j uniform in [0, i] from the high
    64 bits of MixSeed(seed, i) * (i + 1)."""
    key = mix_seed(mix_seed(np.array(seed, np.uint64), np.array(SHUFFLE_STREAM, np.uint64)),
                   np.array(epoch, np.uint64))
    i = np.arange(n - 1, 0, -1, dtype=np.uint64)
    r, b = mix_seed(key, i), i + np.uint64(1)  # b < 2^32: no partial product overflows
    low = np.uint64(0xffffffff)
    js = ((r >> np.uint64(32)) * b + (((r & low) * b) >> np.uint64(32))) >> np.uint64(32)
    order = list(range(n))
    for a, j in zip(i.tolist(), js.tolist()):
        order[a], order[j] = order[j], order[a]
    return np.array(order, dtype=np.int64)


# --- Datasets, as spill reads them --------------------------------------------

def read_maybe_gzipped(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        return f.read()


def text_files(path):
    """OpenCharText's files: the file, or the regular files directly in the
    folder (no symbolic links, hidden names or .dat indexes), in byte order."""
    if not os.path.isdir(path):
        return [path]
    names = [e.name for e in os.scandir(path)
             if not e.name.startswith(".") and not e.name.endswith(".dat") and e.is_file(follow_symlinks=False)]
    return [os.path.join(path, name) for name in sorted(names, key=os.fsencode)]


def text_windows(ids, sequence):
    """Example i: the window at i*T, labelled with the bytes after it."""
    size = (len(ids) - 1) // sequence
    inputs = ids[:size * sequence].reshape(size, 1, 1, sequence)
    labels = ids[1:size * sequence + 1].reshape(size, 1, 1, sequence)
    return inputs.astype(np.float32), labels.astype(np.float32)


def open_text(data, base):
    if data.get("streams", False):
        sys.exit("train_torch: data.streams is not supported (windows are shuffled here)")
    path = resolve(data["path"], base)
    corpus = np.frombuffer(b"".join(read_maybe_gzipped(f) for f in text_files(path)), dtype=np.uint8)
    vocabulary = data.get("vocabulary")
    if vocabulary:
        symbols = np.unique(np.frombuffer(read_maybe_gzipped(resolve(vocabulary, base)), dtype=np.uint8))
    else:
        symbols = np.unique(corpus)
    id_of = np.full(256, -1, dtype=np.int64)
    id_of[symbols] = np.arange(len(symbols))
    ids = id_of[corpus]
    if (ids < 0).any():
        sys.exit(f"train_torch: {path} has bytes outside the vocabulary {vocabulary}")
    test = int(math.floor(len(ids) * number(data, "test_fraction", 0.05)))
    sequence = int(data["sequence"])
    train_split, test_split = ids[:len(ids) - test], ids[len(ids) - test:]
    return (text_windows(train_split, sequence), text_windows(test_split, sequence),
            f"text {path}: {len(symbols)} symbols, {len(train_split)} + {len(test_split)} bytes")


def check_augment(data, key):
    """The idx kinds here take a normalization only; returns (mean, std) or None."""
    augment = data.get(key) or {}
    unsupported = [k for k in ("resize", "crop", "pad", "random_crop", "flip") if augment.get(k)]
    if unsupported:
        sys.exit(f"train_torch: data.{key}.{unsupported[0]} is not supported")
    if "mean" not in augment:
        return None
    return [number({"v": v}, "v", 0) for v in augment["mean"]], [number({"v": v}, "v", 0) for v in augment["std"]]


def read_idx(directory, name):
    plain = os.path.join(directory, name)
    return read_maybe_gzipped(plain if os.path.exists(plain) else plain + ".gz")


def open_idx_split(data, base, prefix, augment_key):
    directory = resolve(data["path"], base)
    images = read_idx(directory, f"{prefix}-images-idx3-ubyte")
    labels = read_idx(directory, f"{prefix}-labels-idx1-ubyte")
    count, rows, cols = struct.unpack(">III", images[4:16])
    pixels = np.frombuffer(images, dtype=np.uint8, offset=16).reshape(count, 1, rows, cols)
    classes = np.frombuffer(labels, dtype=np.uint8, offset=8).astype(np.float32).reshape(count, 1, 1, 1)
    mean, std = check_augment(data, augment_key) or ([IDX_NORMALIZATION[data["dataset"]][0]],
                                                     [IDX_NORMALIZATION[data["dataset"]][1]])
    # Augmenter's table, in float32 as spill computes it: (v / 255 - mean) / std.
    table = (np.arange(256, dtype=np.float32) / np.float32(255) - np.float32(mean[0])) / np.float32(std[0])
    return table[pixels], classes


def open_data(data, base):
    """(train inputs, labels), (test inputs, labels), a description."""
    kind = data.get("dataset", "fashion_mnist")
    if kind == "text":
        return open_text(data, base)
    if kind in IDX_NORMALIZATION:
        train = open_idx_split(data, base, "train", "augment")
        test = open_idx_split(data, base, "t10k", "test_augment")
        return train, test, f"{kind} {resolve(data['path'], base)}: {len(train[0])} + {len(test[0])} images"
    sys.exit(f"train_torch: dataset {kind} is not supported (fashion_mnist, mnist, text)")


# --- The schedule (framework/solver/lr_schedule.cc) ---------------------------

def make_schedule(solver, solver_type, steps_per_epoch, total_steps):
    """LrSchedule with its lengths in steps, as the trainer turns epochs into steps."""
    s = solver.get("schedule") or {}
    unit = steps_per_epoch if s.get("unit", "epoch") == "epoch" else 1
    return {"type": s.get("type", "constant"),
            "lr": number(solver, "lr", 1e-3 if solver_type == "adam" else 0.1),
            "gamma": number(s, "gamma", 0.1),
            "step_size": int(number(s, "step_size", 0)) * unit,
            "milestones": [int(m) * unit for m in s.get("milestones", [])],
            "min_lr": number(s, "min_lr", 0.0),
            "warmup": int(number(s, "warmup", 0)) * unit,
            "warmup_factor": number(s, "warmup_factor", 0.1),
            "total_steps": total_steps}


def learning_rate(s, step):
    rate = s["lr"]
    if s["type"] == "step":
        rate = s["lr"] * s["gamma"] ** (step // s["step_size"])
    elif s["type"] == "multistep":
        rate = s["lr"] * s["gamma"] ** bisect.bisect_right(s["milestones"], step)
    elif s["type"] == "cosine":
        progress = min(1.0, max(step - s["warmup"], 0) / (s["total_steps"] - s["warmup"]))
        rate = s["min_lr"] + 0.5 * (s["lr"] - s["min_lr"]) * (1.0 + math.cos(math.pi * progress))
    if step < s["warmup"]:
        rate *= s["warmup_factor"] + (1.0 - s["warmup_factor"]) * step / s["warmup"]
    return rate


def make_solver(config, spec, model):
    """Spill's solver: weight decay scaled per parameter by its decay_mult."""
    groups = {}
    for layer in spec["layers"]:
        for t in layer["tensors"]:
            if t["trainable"]:
                groups.setdefault(t["decay_mult"], []).append(model.tensor(t["name"]))
    groups = [{"params": params, "weight_decay": config["weight_decay"] * mult} for mult, params in groups.items()]
    if config["type"] == "adam":
        return torch.optim.Adam(groups, lr=1.0, betas=(config["beta1"], config["beta2"]), eps=config["epsilon"])
    return torch.optim.SGD(groups, lr=1.0, momentum=config["momentum"], nesterov=config["nesterov"])


# --- Training and evaluation --------------------------------------------------

def evaluate(model, test, batch):
    """Mean cross-entropy per scored label and top-1 accuracy over the test
    split, in order, as spill's EvaluateDataset."""
    inputs, labels = test
    ignored = next(l["params"].get("ignore_label", -100) for l in model.spec["layers"] if l["type"] == "softmax_loss")
    model.eval()
    total, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for first in range(0, len(inputs), batch):
            x, y = torch.from_numpy(inputs[first:first + batch]), torch.from_numpy(labels[first:first + batch])
            model(x, y)
            y = y.reshape(len(x), -1).long()
            scores = model.scores.reshape(len(x), model.scores.shape[1], -1)
            total += float(F.cross_entropy(scores.double(), y, ignore_index=ignored, reduction="sum"))
            kept = y != ignored
            correct += int(((scores.argmax(dim=1) == y) & kept).sum())
            count += int(kept.sum())
    model.train()
    return total / max(count, 1), correct / max(count, 1), count


class Run:
    """Steps of the config's schedule over spill's batches, timed."""

    def __init__(self, model, solver, schedule, train, batch, seed, shuffle):
        self.model, self.solver, self.schedule = model, solver, schedule
        self.inputs = torch.from_numpy(train[0])
        self.labels = torch.from_numpy(train[1])
        self.batch, self.seed, self.shuffle = batch, seed, shuffle
        self.steps_per_epoch = len(train[0]) // batch  # the loader drops a last partial batch
        self.orders = {}
        self.losses, self.train_seconds = [], 0.0

    def rows(self, step):
        epoch, index = divmod(step, self.steps_per_epoch)
        if epoch not in self.orders:
            n = len(self.inputs)
            self.orders = {epoch: permutation(n, self.seed, epoch) if self.shuffle else np.arange(n)}
        return torch.from_numpy(self.orders[epoch][index * self.batch:(index + 1) * self.batch])

    def step(self, step):
        rows = self.rows(step)
        start = time.perf_counter()
        lr = learning_rate(self.schedule, step)
        for group in self.solver.param_groups:
            group["lr"] = lr
        self.solver.zero_grad()
        loss = self.model(self.inputs[rows], self.labels[rows])
        loss.backward()
        self.solver.step()
        loss = float(loss)
        self.train_seconds += time.perf_counter() - start
        if not math.isfinite(loss):
            sys.exit(f"train_torch: the loss of step {step + 1} is {loss}")
        self.losses.append(loss)
        return loss, lr


def check_batches(run, trace, steps):
    """Whether the first steps' batches are the trace's (spill's)."""
    traced = min(steps, len(trace["loss"]))
    for step in range(traced):
        rows = run.rows(step)
        if not (np.array_equal(trace["images"][step], run.inputs[rows].numpy())
                and np.array_equal(trace["labels"][step], run.labels[rows].numpy())):
            return f"batch {step + 1} DIFFERS from spill's (trace)"
    return "the first batch is spill's (trace)" if traced == 1 else f"the first {traced} batches are spill's (trace)"


def load_trace(directory):
    """The traced network, its solver settings, initial weights and steps."""
    with open(os.path.join(directory, "net.json")) as f:
        spec = json.load(f)
    with open(os.path.join(directory, "solver.json")) as f:
        solver_config = json.load(f)
    return (spec, solver_config, np.load(os.path.join(directory, "initial.npz")),
            np.load(os.path.join(directory, "trace.npz")))


def check_shapes(spec, batch, train):
    taken = spec["layers"][0]["outputs"][0]
    given = [batch] + list(train[0].shape[1:])
    if list(taken) != given:
        sys.exit(f"train_torch: the trace's network takes {taken} but the config gives batches of "
                 f"{given}: trace this config")


def train(run, test, steps, eval_every, trace, log_every):
    """Runs the steps, evaluating as spill does; returns the evaluations and
    their seconds."""
    evaluations, eval_seconds = [], 0.0
    for step in range(steps):
        loss, lr = run.step(step)
        done = step + 1
        if step == 0:
            spill = float(trace["loss"][0])
            print(f"first-step loss: pytorch {loss:.7f}, spill {spill:.7f} (trace), relative difference "
                  f"{abs(loss - spill) / max(abs(spill), 1e-12):.2e}; lr {lr:g} (spill {float(trace['lr'][0]):g})",
                  flush=True)
        if log_every and done % log_every == 0:
            print(f"step {done}/{steps} (epoch {done / run.steps_per_epoch:.2f}): loss {loss:.4f}, lr {lr:.3g}, "
                  f"{run.train_seconds / done:.3f} s/step", flush=True)
        epoch_end = done % run.steps_per_epoch == 0
        if (eval_every > 0 and done % eval_every == 0) or (eval_every == 0 and epoch_end) or done == steps:
            begin = time.perf_counter()
            test_loss, accuracy, count = evaluate(run.model, test, run.batch)
            eval_seconds += time.perf_counter() - begin
            evaluations.append({"step": done, "test_loss": test_loss, "test_accuracy": accuracy})
            print(f"step {done}: test loss {test_loss:.4f}, test accuracy {100 * accuracy:.2f}% ({count} labels)",
                  flush=True)
    return evaluations, eval_seconds


def make_report(args, spec, run, trace, evaluations, eval_seconds, seconds):
    steps = len(run.losses)
    last_epoch = run.losses[(steps - 1) // run.steps_per_epoch * run.steps_per_epoch:]
    return {"framework": f"pytorch {torch.__version__}", "network": spec["name"],
            "config": args.config or f"{args.trace} (recorded)", "threads": args.threads, "batch": run.batch,
            "steps": steps, "epochs": steps / run.steps_per_epoch,
            "train_loss": sum(last_epoch) / len(last_epoch),  # the last epoch's, as spill reports it
            "test_loss": evaluations[-1]["test_loss"], "test_accuracy": evaluations[-1]["test_accuracy"],
            "train_seconds": run.train_seconds, "seconds_per_step": run.train_seconds / steps,
            "images_per_second": steps * run.batch / run.train_seconds, "eval_seconds": eval_seconds,
            "seconds": seconds, "first_loss": run.losses[0], "spill_first_loss": float(trace["loss"][0]),
            "evaluations": evaluations, "losses": run.losses}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="directory written by train --trace (net.json, initial.npz, solver.json)")
    parser.add_argument("--config", help="the training config (default: the one recorded in the trace)")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="stop after N steps (the schedule stays the full run's)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--log-every", type=int, default=100, help="steps between progress lines (0: none)")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    crosscheck = load_replica()
    spec, solver_config, weights, trace = load_trace(args.trace)
    config, base = read_config(args, weights)
    data, run_section = config.get("data") or {}, config.get("run") or {}
    train_split, test_split, described = open_data(data, base)
    batch = int(data.get("batch", 64))
    check_shapes(spec, batch, train_split)
    seed = int(run_section.get("seed", 1))
    torch.manual_seed(seed)
    model = scoring_replica(crosscheck)(spec, weights, torch.float32, random_dropout=True)
    steps_per_epoch = len(train_split[0]) // batch
    total = int(run_section.get("steps") or 0) or int(run_section.get("epochs", 0)) * steps_per_epoch
    if total < 1:
        sys.exit("train_torch: the config sets neither run.epochs nor run.steps")
    schedule = make_schedule(config.get("solver") or {}, solver_config["type"], steps_per_epoch, total)
    run = Run(model, make_solver(solver_config, spec, model), schedule, train_split, batch, seed,
              data.get("shuffle", True))
    steps = min(total, args.max_steps) if args.max_steps else total
    print(f"pytorch {torch.__version__}: {spec['name']} on {described}; batch {batch}, "
          f"{steps_per_epoch} steps per epoch, {steps} of {total} steps, {solver_config['type']} "
          f"lr {schedule['lr']:g} ({schedule['type']}), {args.threads} threads", flush=True)
    print(f"data: {check_batches(run, trace, steps)}", flush=True)
    started = time.perf_counter()
    evaluations, eval_seconds = train(run, test_split, steps, int(run_section.get("eval_every", 0)), trace,
                                      args.log_every)
    report = make_report(args, spec, run, trace, evaluations, eval_seconds, time.perf_counter() - started)
    print(f"pytorch {torch.__version__} {spec['name']}: {steps} steps ({report['epochs']:.2f} epochs) in "
          f"{run.train_seconds:.1f} s of training ({report['seconds_per_step']:.3f} s/step, "
          f"{report['images_per_second']:.1f} images/s, {args.threads} threads), {report['seconds']:.1f} s in all; "
          f"test loss {report['test_loss']:.4f}, test accuracy {100 * report['test_accuracy']:.2f}%")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()

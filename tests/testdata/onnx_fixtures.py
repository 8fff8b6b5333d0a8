#!/usr/bin/env python3
"""Builds the ONNX test fixtures of tests/onnx_test.cc in PyTorch.

Four small networks, each written as PyTorch users write them and exported
with torch.onnx.export: a torchvision-style ResNet-18 (BasicBlocks 2-2-2-2,
the ImageNet stem, narrow widths), a VGG-11 (configuration A, its classifier
behind the x.view(N, -1) reshape), an Inception-style block with four
branches (grouped, dilated and 1x1 convolutions, pooling, LeakyReLU)
and a DenseNet-style dense block (BN-ReLU-Conv bottlenecks joined by
concatenation, a classifier written as matmul + add). Inputs are 32x32 and
widths narrow, so all four together stay under two megabytes. (PyTorch
writes LocalResponseNorm as a chain of elementwise operators, not ONNX's
LRN, so LRN is covered by spill's own export instead.)

Then torchvision's own mobile and modern networks, built by their
constructors at a few narrow stages: MobileNetV2 (Clip as ReLU6),
MobileNetV3 (HardSwish, HardSigmoid, squeeze-and-excitation's Mul),
EfficientNet (SiLU as Sigmoid and Mul), ShuffleNetV2 (channel shuffle as
Reshape-Transpose-Reshape, Split, ReduceMean), RegNet-Y (sigmoid gates) and
ConvNeXt (layer norm over channels behind Transposes, GELU through Erf,
layer scale); their layer scales and norms' affine terms drawn away from
their initial values so that every term counts. These are exported with a
dynamic batch axis, as torch.onnx.export users write it.

Last, the padding that TensorFlow and Keras converters write and PyTorch
never does: a graph built node by node with onnx.helper, whose Conv and
pools carry asymmetric pads ([top, left, bottom, right] unequal) or
auto_pad SAME_UPPER / SAME_LOWER, its reference scores computed in PyTorch
with the padding made explicit (F.pad, -inf for max pooling).

A convolution behind F.pad to a multiple of 4 computed from the input's
shape, as Swin pads to its windows (pad_to_window: Mod, the pads reshaped,
reversed and transposed as integers). Two networks whose
output is probabilities, as deployed models often end: the PyTorch
examples' MNIST classifier with log_softmax (mnist_log_softmax, opset 11)
and a per-pixel classifier with a softmax over the classes (pixel_softmax,
opset 13); their `output` is PyTorch's (log-)probabilities. A small torchvision
VisionTransformer (vit, opset 17): nn.MultiheadAttention
written as MatMul, Softmax and the reshapes around them, a class token by
Expand and Concat, the position embedding added. A small torchvision
SwinTransformer (swin, opset 13): shifted windows by torch.roll (Slice and
Concat), the windows' partition by Reshape and Transpose, the relative
position bias that PyTorch folds into a constant, the shifted windows' mask
computed from constants (ConstantOfShape, Range, ScatterND, Not, Where) and
the patch merging's strided slices. Its version 2 (swin_v2): cosine
attention (ReduceL2, Clip, Div), a logit scale per head (Clip, Exp), the
relative position bias computed by an MLP from the weights (MatMul, Relu,
Gather, Sigmoid), the keys' bias zeroed by ScatterND. With windows of 3
(swin_padded), each attention pads its map to the windows and cuts it back.
A small torchvision MaxVit (maxvit, opset 17): MBConv blocks (batch norm,
depthwise convolution, squeeze-and-excitation, an average-pooled shortcut),
attention in windows and in a grid computed in the partitioned view
(Reshape, Transpose, Reshape, and SwapAxes for the grid), its products
written as Einsum, a relative position bias folded into a constant, the
scores scaled by C^-1/2, and a classifier ending in Tanh and a Linear.

Then sequence models as PyTorch users write a character model: ids (N, T)
through nn.Embedding, a batch-first nn.LSTM of two layers, and an nn.Linear
at every step, the scores (N, classes, T) as nn.CrossEntropyLoss takes
them (char_lstm); the same with a two-layer GRU (char_gru) and a two-layer
bidirectional LSTM (char_bilstm); an LSTM reading float features
(N, T, C) without an embedding (seq_features); and causal attention
(char_attention: nn.MultiheadAttention with a float mask, -inf above the
diagonal, after an embedding with learned positions). torch.onnx.export writes
them as Gather, Transpose to time-major, ONNX's LSTM and GRU (one node per
layer, gates in ONNX's order), Squeeze or Transpose + Reshape of their
outputs, MatMul + Add, and - with a dynamic batch - the zero initial
states computed from the batch size (Shape ... ConstantOfShape, Slice;
Expand with a fixed batch).

For each network NAME it writes NAME.onnx and NAME.npz (arrays `input`, a
batch of two images, and `output`, PyTorch's scores for it) into the output
folder; a sequence model's `input` is in spill's layout, N x C x 1 x T
(ids as floats, N x 1 x 1 x T; features transposed to channels first),
and its `output` (N, classes, T) is spill's N x classes x 1 x T. Batch norm
is exported as its own node with its running statistics
(TrainingMode.PRESERVE of a model in eval mode: not folded into the
convolutions), after a few training-mode forwards have moved the statistics
away from their initial values.

    python3 tests/testdata/onnx_fixtures.py tests/testdata/onnx     # needs python3-torch, python3-onnx
    python3 tests/testdata/onnx_fixtures.py tests/testdata/onnx asymmetric_pads   # only these

spill's own exports go the other way: with --check-exports, each small
model of models/ (the versions tests/onnx_test.cc round-trips, sized for
Fashion-MNIST padded to 32x32) is exported by tools/onnx_export and must
pass ONNX's full check (onnx.checker with full_check, strict shape
inference) in Python's onnx, as other runtimes would load it:

    bazel build //tools:onnx_export
    python3 tests/testdata/onnx_fixtures.py --check-exports bazel-bin/tools/onnx_export

It also exports a sequence network (an embedding, LSTMs and GRUs of one and
two levels, one-way and bidirectional, with and without biases) from a
checkpoint drawn here, and runs the exported graph with ONNX's reference
LSTM and GRU cells (onnx.backend.test.case.node): its scores must be
PyTorch's for nn.Embedding, nn.LSTM and nn.GRU loaded with the same
checkpoint, whose names are PyTorch's own (lstm/weight_ih_l0 ...).

(The networks draw their initial weights from one generator in turn, so one
written alone differs from the same one written in a full run; the
asymmetric_pads fixture draws from its own and is the same either way.)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from functools import partial
from onnx import helper, numpy_helper
from onnx.backend.test.case.node.gru import GRU_Helper
from onnx.backend.test.case.node.lstm import LSTM_Helper
from torchvision.models.convnext import CNBlockConfig
from torchvision.models.efficientnet import MBConvConfig
from torchvision.models.mobilenetv3 import InvertedResidualConfig
from torchvision.models.regnet import BlockParams

BATCH = 2
SIZE = 32
CLASSES = 10


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNet18(nn.Module):
    """torchvision.models.resnet18's structure at 1/8 of its widths."""

    def __init__(self, width=8):
        super().__init__()
        w = [width, 2 * width, 4 * width, 8 * width]
        self.conv1 = nn.Conv2d(3, w[0], 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(w[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        layers, cin = [], w[0]
        for i, cout in enumerate(w):
            stride = 1 if i == 0 else 2
            layers.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(w[3], CLASSES)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class Vgg11(nn.Module):
    """VGG configuration A at 1/8 of its widths, for 32x32 inputs."""

    def __init__(self):
        super().__init__()
        layers, cin = [], 3
        for v in [8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"]:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(inplace=True)]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(64, 32), nn.ReLU(True), nn.Dropout(),
            nn.Linear(32, 32), nn.ReLU(True), nn.Dropout(),
            nn.Linear(32, CLASSES))

    def forward(self, x):
        x = self.features(x)
        return self.classifier(x.view(x.size(0), -1))


class Inception(nn.Module):
    """A stem, one Inception-style block of four branches, a classifier."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.b1 = nn.Conv2d(16, 8, 1)
        self.b2_reduce = nn.Conv2d(16, 8, 1)
        self.b2 = nn.Conv2d(8, 12, 3, padding=2, dilation=2)
        self.b3_reduce = nn.Conv2d(16, 8, 1)
        self.b3 = nn.Conv2d(8, 8, (1, 5), padding=(0, 2), groups=4)
        self.b4_pool = nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)
        self.b4 = nn.Conv2d(16, 4, 1)
        self.act = nn.LeakyReLU(0.1)
        self.pool = nn.MaxPool2d(3, stride=2, ceil_mode=True)
        self.fc = nn.Linear(32 * 8 * 8, CLASSES)

    def forward(self, x):
        x = F.relu(self.stem(x))
        a = self.act(self.b1(x))
        b = self.act(self.b2(self.act(self.b2_reduce(x))))
        c = self.act(self.b3(self.act(self.b3_reduce(x))))
        d = self.act(self.b4(self.b4_pool(x)))
        x = self.pool(torch.cat([a, b, c, d], 1))
        return self.fc(torch.flatten(x, 1))


class DenseBlock(nn.Module):
    """DenseNet's dense block (BN-ReLU-Conv1x1-BN-ReLU-Conv3x3, concatenated)."""

    def __init__(self, layers=3, growth=6, cin=12):
        super().__init__()
        self.stem = nn.Conv2d(3, cin, 3, padding=1, bias=False)
        self.units = nn.ModuleList()
        for i in range(layers):
            c = cin + i * growth
            self.units.append(nn.Sequential(
                nn.BatchNorm2d(c), nn.ReLU(inplace=True), nn.Conv2d(c, 4 * growth, 1, bias=False),
                nn.BatchNorm2d(4 * growth), nn.ReLU(inplace=True),
                nn.Conv2d(4 * growth, growth, 3, padding=1, bias=False)))
        c = cin + layers * growth
        self.norm = nn.BatchNorm2d(c)
        self.transition = nn.AvgPool2d(3, 2, padding=1)  # PyTorch writes Pad + AveragePool
        self.weight = nn.Parameter(torch.randn(c, CLASSES) * 0.1)
        self.bias = nn.Parameter(torch.randn(CLASSES) * 0.1)

    def forward(self, x):
        x = self.stem(x)
        for unit in self.units:
            x = torch.cat([x, unit(x)], 1)
        x = self.transition(F.relu(self.norm(x)))
        x = F.adaptive_avg_pool2d(x, 1).flatten(1)
        return x @ self.weight + self.bias


MOBILE = ["mobilenet_v2", "mobilenet_v3", "efficientnet", "shufflenet_v2", "regnet_y", "convnext"]


def Mobile(name):
    """torchvision's mobile and modern networks at a few narrow stages."""
    if name == "mobilenet_v2":
        return torchvision.models.MobileNetV2(
            num_classes=CLASSES, width_mult=0.25,
            inverted_residual_setting=[[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 1, 2]])
    if name == "mobilenet_v3":
        c = partial(InvertedResidualConfig, width_mult=1.0)
        return torchvision.models.MobileNetV3(
            [c(16, 3, 16, 16, True, "RE", 2, 1), c(16, 3, 48, 24, False, "RE", 2, 1),
             c(24, 5, 64, 24, True, "HS", 1, 1)], last_channel=64, num_classes=CLASSES)
    if name == "efficientnet":
        return torchvision.models.efficientnet.EfficientNet(
            [MBConvConfig(1, 3, 1, 16, 16, 1), MBConvConfig(6, 3, 2, 16, 24, 2),
             MBConvConfig(6, 5, 2, 24, 32, 1)], dropout=0.2, num_classes=CLASSES, last_channel=64)
    if name == "shufflenet_v2":
        return torchvision.models.ShuffleNetV2([2, 1, 1], [8, 16, 32, 48, 64], num_classes=CLASSES)
    if name == "regnet_y":
        params = BlockParams.from_init_params(depth=3, w_0=8, w_a=8.0, w_m=2.0, group_width=8,
                                              se_ratio=0.25)
        return torchvision.models.RegNet(params, num_classes=CLASSES, stem_width=8)
    if name == "convnext":
        return torchvision.models.ConvNeXt(
            [CNBlockConfig(8, 16, 1), CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)],
            num_classes=CLASSES)
    raise ValueError(name)


def Randomize(model):
    """Layer scales and norms' affine terms away from their initial values."""
    for m in model.modules():
        if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
        if isinstance(getattr(m, "layer_scale", None), nn.Parameter):
            with torch.no_grad():
                m.layer_scale.uniform_(0.5, 1.0)


def Export(name, model, folder, opset, dynamic=False):
    torch.manual_seed(1)
    model.train()
    with torch.no_grad():
        for _ in range(3):  # move the batch norm statistics off their initial values
            model(torch.randn(8, 3, SIZE, SIZE) * 2 + 0.5)
    model.eval()
    Randomize(model)
    x = torch.randn(BATCH, 3, SIZE, SIZE)
    with torch.no_grad():
        y = model(x)
    path = os.path.join(folder, name + ".onnx")
    torch.onnx.export(model, x, path, opset_version=opset, input_names=["input"],
                      output_names=["scores"], training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=True,
                      dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"}} if dynamic else None)
    np.savez(os.path.join(folder, name + ".npz"), input=x.numpy(), output=y.numpy())
    print(f"{path}: opset {opset}, {os.path.getsize(path)} bytes")


def SamePads(size, kernel, stride, upper):
    """auto_pad SAME's [begin, end] for one axis: the output is ceil(size / stride)."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    small, large = total // 2, total - total // 2
    return (small, large) if upper else (large, small)


def AsymmetricPads(folder):
    """Conv and pools padded unequally, as TensorFlow's converters write them.

    Each window is (op, kernel, stride, pads or auto_pad); pads are ONNX's
    [top, left, bottom, right]. The reference pads explicitly and then
    windows without padding.
    """
    windows = [
        ("Conv", (3, 3), 2, [0, 0, 1, 1]),           # TF SAME, stride 2, even input
        ("MaxPool", (3, 3), 2, [0, 0, 1, 1]),
        ("Conv", (2, 4), 1, "SAME_LOWER"),           # 1 and 3 to spread: [1, 2, 0, 1]
        ("Conv", (3, 3), 1, [2, 1, 1, 0]),           # a symmetric part and an excess
        ("AveragePool", (2, 2), 2, [1, 0, 0, 1]),    # count_include_pad 1
        ("MaxPool", (3, 3), 2, "SAME_UPPER"),
    ]
    g = torch.Generator().manual_seed(3)
    x = torch.randn(BATCH, 3, SIZE, SIZE, generator=g)
    nodes, inits, y, name, c = [], [], x, "input", 3
    for i, (op, k, s, pads) in enumerate(windows):
        attrs = {"kernel_shape": list(k), "strides": [s, s]}
        if isinstance(pads, str):
            attrs["auto_pad"] = pads
            (t, b), (l, r) = (SamePads(y.shape[2 + j], k[j], s, pads == "SAME_UPPER")
                              for j in range(2))
        else:
            attrs["pads"] = pads
            t, l, b, r = pads
        fill = float("-inf") if op == "MaxPool" else 0.0
        padded = F.pad(y, (l, r, t, b), value=fill)
        inputs = [name]
        if op == "Conv":
            w = torch.randn(8, c, *k, generator=g) * 0.3
            bias = torch.randn(8, generator=g) * 0.1
            inputs += [f"conv{i}.weight", f"conv{i}.bias"]
            inits += [numpy_helper.from_array(w.numpy(), inputs[1]),
                      numpy_helper.from_array(bias.numpy(), inputs[2])]
            y, c = F.relu(F.conv2d(padded, w, bias, stride=s)), 8
        elif op == "MaxPool":
            y = F.max_pool2d(padded, k, s)
        else:
            attrs["count_include_pad"] = 1
            y = F.avg_pool2d(padded, k, s)
        out = f"window{i}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"{op.lower()}{i}", **attrs))
        if op == "Conv":
            nodes.append(helper.make_node("Relu", [out], [out + ".relu"]))
            out += ".relu"
        name = out
    fc_w = torch.randn(CLASSES, y[0].numel(), generator=g) * 0.1
    fc_b = torch.randn(CLASSES, generator=g) * 0.1
    inits += [numpy_helper.from_array(fc_w.numpy(), "fc.weight"),
              numpy_helper.from_array(fc_b.numpy(), "fc.bias")]
    nodes += [helper.make_node("Flatten", [name], ["flat"]),
              helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["scores"], transB=1)]
    scores = torch.flatten(y, 1) @ fc_w.t() + fc_b
    graph = helper.make_graph(
        nodes, "asymmetric_pads",
        [helper.make_tensor_value_info("input", onnx.TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, list(scores.shape))],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(folder, "asymmetric_pads.onnx")
    onnx.save(model, path)
    np.savez(os.path.join(folder, "asymmetric_pads.npz"), input=x.numpy(), output=scores.numpy())
    print(f"{path}: opset 13, {os.path.getsize(path)} bytes")


VOCABULARY, EMBEDDING, HIDDEN, STEPS, FEATURES = 11, 6, 5, 7, 4


class CharModel(nn.Module):
    """ids (N, T) -> scores (N, classes, T): embedding, recurrent layers, a Linear per step."""

    def __init__(self, rnn, layers, bidirectional=False):
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, EMBEDDING)
        self.lstm = rnn(EMBEDDING, HIDDEN, num_layers=layers, batch_first=True,
                        bidirectional=bidirectional)
        self.fc = nn.Linear(HIDDEN * (2 if bidirectional else 1), VOCABULARY)

    def forward(self, ids):
        y, _ = self.lstm(self.embed(ids))
        return self.fc(y).transpose(1, 2)


class FeatureModel(nn.Module):
    """features (N, T, C) -> scores (N, classes, T): an LSTM and a Linear per step."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(FEATURES, HIDDEN, batch_first=True)
        self.fc = nn.Linear(HIDDEN, 3)

    def forward(self, x):
        y, _ = self.lstm(x)
        return self.fc(y).transpose(1, 2)


class PadToWindow(nn.Module):
    """Padded on the right and the bottom to a multiple of 4, as Swin pads to
    its windows: F.pad by amounts computed from the input's shape (Mod, and
    the pads as a (-1, 2) tensor reversed and transposed)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4, CLASSES)

    def forward(self, x):
        h, w = x.shape[2], x.shape[3]
        x = F.pad(x, (0, (4 - w % 4) % 4, 0, (4 - h % 4) % 4))
        return self.fc(self.conv(x).mean(dim=(2, 3)))


def ExportPadToWindow(folder):
    torch.manual_seed(3)
    model = PadToWindow().eval()
    x = torch.randn(BATCH, 3, 30, 30)
    with torch.no_grad():
        y = model(x)
    path = os.path.join(folder, "pad_to_window.onnx")
    torch.onnx.export(model, x, path, opset_version=13, input_names=["input"],
                      output_names=["scores"], do_constant_folding=True,
                      dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"}})
    np.savez(os.path.join(folder, "pad_to_window.npz"), input=x.numpy(), output=y.numpy())
    print(f"{path}: opset 13, {os.path.getsize(path)} bytes")


class MnistNet(nn.Module):
    """The PyTorch examples' MNIST classifier (narrower), ending in
    log_softmax as nn.NLLLoss takes it."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, 1)
        self.conv2 = nn.Conv2d(8, 8, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(8 * 14 * 14, 32)
        self.fc2 = nn.Linear(32, CLASSES)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
        x = torch.flatten(self.dropout1(x), 1)
        x = self.fc2(self.dropout2(F.relu(self.fc1(x))))
        return F.log_softmax(x, dim=1)


class PixelSoftmax(nn.Module):
    """A per-pixel classifier whose map ends in a softmax over the classes."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, CLASSES, 1)

    def forward(self, x):
        return F.softmax(self.conv2(F.relu(self.conv1(x))), dim=1)


def ExportWithSeed(name, build, folder, opset):
    torch.manual_seed(5)
    Export(name, build(), folder, opset, dynamic=True)


def Vit():
    """torchvision's VisionTransformer, small: 4x4 patches of 8x8 pixels, two blocks."""
    model = torchvision.models.VisionTransformer(image_size=SIZE, patch_size=8, num_layers=2,
                                                 num_heads=2, hidden_dim=16, mlp_dim=32,
                                                 num_classes=CLASSES)
    with torch.no_grad():  # its classifier and class token start at zero
        for p in model.parameters():
            if not p.any():
                p.uniform_(-0.3, 0.3)
    return model


def Swin(window=2):
    """torchvision's SwinTransformer, small: 4x4 patches of a 32x32 image, two
    stages of two blocks (windows of 2x2, every second block's shifted by 1),
    the patch merging between them; the relative position tables drawn wide
    so that the bias counts. With windows of 3 (swin_padded) the 8x8 and 4x4
    maps are padded to 9x9 and 6x6 and cut back after each attention."""
    model = torchvision.models.SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2, 2],
                                               num_heads=[2, 2], window_size=[window, window],
                                               num_classes=CLASSES)
    with torch.no_grad():
        for m in model.modules():
            table = getattr(m, "relative_position_bias_table", None)
            if table is not None:
                table.uniform_(-0.5, 0.5)
    return model


def SwinV2():
    """The same Swin in version 2 (torchvision's SwinTransformerBlockV2 and
    PatchMergingV2): cosine attention with a learned logit scale per head,
    the relative position bias from a small MLP of log-spaced coordinates,
    the keys' bias zeroed in forward, norms after the residual branches. The
    logit scales drawn apart so that each counts."""
    from torchvision.models.swin_transformer import PatchMergingV2, SwinTransformerBlockV2
    model = torchvision.models.SwinTransformer(patch_size=[4, 4], embed_dim=8, depths=[2, 2],
                                               num_heads=[2, 2], window_size=[2, 2],
                                               num_classes=CLASSES, block=SwinTransformerBlockV2,
                                               downsample_layer=PatchMergingV2)
    with torch.no_grad():
        for m in model.modules():
            scale = getattr(m, "logit_scale", None)
            if scale is not None:
                scale.uniform_(1.0, 3.0)
    return model


def MaxVit():
    """torchvision's MaxVit, small: a 32x32 image, a stem to 16x16, two
    stages of one block (8x8 with 8 channels, 4x4 with 16, heads of 4),
    partitions of 2: windows of 2x2 blocks and a grid of 2x2 pixels spread
    4 apart (then 2); the relative position tables drawn wide."""
    from torchvision.models.maxvit import MaxVit as TorchMaxVit
    model = TorchMaxVit(input_size=(SIZE, SIZE), stem_channels=8, partition_size=2,
                        block_channels=[8, 16], block_layers=[1, 1], head_dim=4,
                        stochastic_depth_prob=0.0, num_classes=CLASSES)
    with torch.no_grad():
        for m in model.modules():
            table = getattr(m, "relative_position_bias_table", None)
            if table is not None:
                table.uniform_(-0.5, 0.5)
    return model


def ExportZeroInPlace():
    """Swin V2 zeroes its keys' bias in place (qkv_bias[C:2C].zero_()), for
    which PyTorch 1.13's exporter has no symbolic (aten::zero): x - x, as a
    user exporting it writes."""
    torch.onnx.register_custom_op_symbolic("aten::zero", lambda g, x: g.op("Sub", x, x), 13)


class CharAttention(nn.Module):
    """ids (N, T) -> scores (N, classes, T): an embedding with learned positions,
    causal nn.MultiheadAttention (a float mask, -inf above the diagonal) and a
    Linear per step."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCABULARY, 8)
        self.pos = nn.Parameter(torch.randn(1, STEPS, 8) * 0.5)
        self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
        self.fc = nn.Linear(8, VOCABULARY)
        mask = torch.full((STEPS, STEPS), float("-inf")).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, ids):
        x = self.embed(ids) + self.pos
        y, _ = self.attn(x, x, x, attn_mask=self.mask, need_weights=False)
        return self.fc(y + x).transpose(1, 2)


SEQUENCES = {  # name: (model, opset, dynamic batch)
    "char_lstm": (lambda: CharModel(nn.LSTM, 2), 13, True),
    "char_gru": (lambda: CharModel(nn.GRU, 2), 11, False),
    "char_bilstm": (lambda: CharModel(nn.LSTM, 2, bidirectional=True), 15, True),
    "seq_features": (FeatureModel, 17, True),
    "char_attention": (CharAttention, 17, True),
}


def ExportSequence(name, folder):
    """One of SEQUENCES, drawn from its own seed: the same alone or in a full run."""
    build, opset, dynamic = SEQUENCES[name]
    torch.manual_seed(sorted(SEQUENCES).index(name) + 10)
    model = build().eval()
    if name == "seq_features":
        x = torch.randn(BATCH, STEPS, FEATURES)
        spill_input = x.transpose(1, 2).reshape(BATCH, FEATURES, 1, STEPS)
    else:
        x = torch.randint(0, VOCABULARY, (BATCH, STEPS))
        spill_input = x.float().reshape(BATCH, 1, 1, STEPS)
    with torch.no_grad():
        y = model(x)
    path = os.path.join(folder, name + ".onnx")
    torch.onnx.export(model, x, path, opset_version=opset, input_names=["input"],
                      output_names=["scores"], do_constant_folding=True,
                      dynamic_axes={"input": {0: "batch"}, "scores": {0: "batch"}} if dynamic else None)
    np.savez(os.path.join(folder, name + ".npz"), input=spill_input.numpy(), output=y.numpy())
    print(f"{path}: opset {opset}, {os.path.getsize(path)} bytes")


# The small models of tests/testing/test_networks.h (kSmallModels), one
# channel at 32x32.
SMALL_MODELS = {
    "mobilenet_v2": "{width: 25, depth: 25}",
    "mobilenet_v3_small": "{width: 25, residuals: 0}",
    "efficientnet_b0": "{width: 25, depth: 25}",
    "shufflenet_v2": "{c1: 8, c2: 16, c3: 16, c4: 32, c5: 32, r2: 2, r3: 1, r4: 1}",
    "regnet_y_400mf": "{stem: 8, w1: 8, w2: 16, w3: 16, w4: 24, d1: 1, d2: 2, d3: 1, d4: 1}",
    "convnext_tiny": "{dim: 8, d1: 1, d2: 2, d3: 1, d4: 1, layer_scale: 0.5}",
    "unet": "{width: 2}",
    "unet_bilinear": "{width: 2, up: bilinear}",
}


# The sequence network of CheckSequenceExport: (name, type, hidden, levels,
# bidirectional, bias, input); the layers between are fixed.
SEQUENCE_VOCABULARY, SEQUENCE_STEPS = 96, 9
SEQUENCE_LAYERS = [("lstm", "lstm", 5, 2, False, True, "embed"),
                   ("gru", "gru", 4, 2, True, True, "lstm"),
                   ("bilstm", "lstm", 3, 1, True, False, "act"),
                   ("onegru", "gru", 3, 1, False, False, "act")]


def SequenceCheckpoint(rng):
    """Every parameter of the sequence network, under spill's (PyTorch's) names."""
    shapes = {"embed/weight": (SEQUENCE_VOCABULARY, 6, 1, 1)}
    inputs = {"embed": 6, "lstm": 5, "act": 8}
    for name, kind, hidden, levels, bidirectional, bias, source in SEQUENCE_LAYERS:
        gates, directions = (4 if kind == "lstm" else 3), (2 if bidirectional else 1)
        for level in range(levels):
            for d in range(directions):
                suffix = f"_l{level}" + ("_reverse" if d else "")
                width = inputs[source] if level == 0 else directions * hidden
                shapes[f"{name}/weight_ih{suffix}"] = (gates * hidden, width, 1, 1)
                shapes[f"{name}/weight_hh{suffix}"] = (gates * hidden, hidden, 1, 1)
                if bias:
                    shapes[f"{name}/bias_ih{suffix}"] = (1, gates * hidden, 1, 1)
                    shapes[f"{name}/bias_hh{suffix}"] = (1, gates * hidden, 1, 1)
    shapes["fc/weight"] = (SEQUENCE_VOCABULARY, 9, 1, 1)
    shapes["fc/bias"] = (1, SEQUENCE_VOCABULARY, 1, 1)
    return {"params/" + k: rng.uniform(-0.6, 0.6, v).astype(np.float32) for k, v in shapes.items()}


def SequenceScoresInPyTorch(params, ids):
    """The sequence network in PyTorch, loaded from the checkpoint by name."""
    p = lambda key: torch.from_numpy(params["params/" + key])
    embed = nn.Embedding(SEQUENCE_VOCABULARY, 6)
    embed.weight.data = p("embed/weight").reshape(SEQUENCE_VOCABULARY, 6)
    rnn, width = {}, {"embed": 6, "lstm": 5, "act": 8}
    for name, kind, hidden, levels, bidirectional, bias, source in SEQUENCE_LAYERS:
        m = (nn.LSTM if kind == "lstm" else nn.GRU)(width[source], hidden, num_layers=levels,
                                                    bidirectional=bidirectional, bias=bias,
                                                    batch_first=True)
        m.load_state_dict({k: p(name + "/" + k).reshape(v.shape) for k, v in m.state_dict().items()})
        rnn[name] = m
    with torch.no_grad():
        act = torch.relu(rnn["gru"](rnn["lstm"](embed(ids))[0])[0])
        both = torch.cat([rnn["bilstm"](act)[0], rnn["onegru"](act)[0]], 2)
        scores = both @ p("fc/weight").reshape(SEQUENCE_VOCABULARY, 9).T + p("fc/bias").reshape(-1)
    return scores.transpose(1, 2).numpy()


def RunWithReferenceCells(model, ids):
    """The exported graph in numpy, LSTM and GRU by ONNX's reference cells."""
    values = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    values[model.graph.input[0].name] = ids

    def cell(node, x, w, r, b=None):
        lbr = {a.name: a.i for a in node.attribute}.get("linear_before_reset", 0)
        ys = []
        for d in range(w.shape[0]):  # the reverse direction runs over time reversed
            args = dict(X=x if d == 0 else x[::-1], W=w[d:d + 1], R=r[d:d + 1])
            if b is not None:
                args["B"] = b[d:d + 1]
            helper_ = LSTM_Helper(**args) if node.op_type == "LSTM" else GRU_Helper(
                linear_before_reset=lbr, **args)
            y = helper_.step()[0]
            ys.append(y if d == 0 else y[::-1])
        return np.concatenate(ys, 1)

    for node in model.graph.node:
        x = [values[k] if k else None for k in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        op = node.op_type
        if op == "Gather":
            y = x[0][x[1]]
        elif op == "Transpose":
            y = np.transpose(x[0], attrs["perm"])
        elif op == "Reshape":
            y = x[0].reshape([x[0].shape[k] if d == 0 else d for k, d in enumerate(x[1])])
        elif op == "Squeeze":
            y = np.squeeze(x[0], tuple(x[1]))
        elif op in ("LSTM", "GRU"):
            y = cell(node, *x[:4])
        elif op == "Relu":
            y = np.maximum(x[0], 0)
        elif op == "Concat":
            y = np.concatenate(x, attrs["axis"])
        elif op == "Conv":  # the 1x1 classifier
            y = np.einsum("nchw,kc->nkhw", x[0], x[1][:, :, 0, 0]) + x[2][None, :, None, None]
        elif op == "Identity":
            y = x[0]
        else:
            raise ValueError(f"{op} is not in the sequence network")
        values[node.output[0]] = y
    return values[model.graph.output[0].name][:, :, 0, :]


def CheckSequenceExport(binary, folder):
    """Exports the sequence network from a checkpoint; ONNX's reference cells give PyTorch's scores."""
    rng = np.random.default_rng(5)
    lines = ["name: sequences", "layers:",
             f"  - {{name: ids, type: input, shape: [1, 1, {SEQUENCE_STEPS}], labels: pixels}}",
             f"  - {{name: embed, type: embedding, vocabulary: {SEQUENCE_VOCABULARY}, size: 6}}"]
    for name, kind, hidden, levels, bidirectional, bias, source in SEQUENCE_LAYERS:
        lines.append(f"  - {{name: {name}, type: {kind}, hidden: {hidden}, layers: {levels}, "
                     f"bidirectional: {str(bidirectional).lower()}, bias: {str(bias).lower()}, "
                     f"inputs: [{source}]}}")
        if name == "gru":
            lines.append("  - {name: act, type: relu}")
    lines += ["  - {name: both, type: concat, inputs: [bilstm, onegru]}",
              f"  - {{name: fc, type: convolution, filters: {SEQUENCE_VOCABULARY}, kernel: 1}}",
              "  - {name: loss, type: softmax_loss}"]
    net, config = os.path.join(folder, "sequences.yaml"), os.path.join(folder, "config.yaml")
    checkpoint, path = os.path.join(folder, "ckpt.npz"), os.path.join(folder, "sequences.onnx")
    with open(net, "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(config, "w") as f:
        f.write(f"model: {{file: {net}}}\n"
                f"data: {{dataset: text, path: /usr/share/games/fortunes, "
                f"sequence: {SEQUENCE_STEPS}, batch: 4}}\nrun: {{steps: 1}}\n")
    params = SequenceCheckpoint(rng)
    np.savez(checkpoint, **params)
    run = subprocess.run([binary, "--config", config, "--checkpoint", checkpoint, "--output", path],
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(f"sequences: onnx_export failed: {run.stderr.strip()}")
        return 1
    model = onnx.load(path)
    try:
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception as e:  # onnx's checker and inference raise their own kinds
        print(f"sequences: {e}")
        return 1
    ids = rng.integers(0, SEQUENCE_VOCABULARY, (3, SEQUENCE_STEPS))
    want = SequenceScoresInPyTorch(params, torch.from_numpy(ids))
    error = np.abs(RunWithReferenceCells(model, ids) - want).max() / np.abs(want).max()
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"sequences: {len(model.graph.node)} nodes, full check passed ({', '.join(ops)}); "
          f"ONNX's reference cells give PyTorch's scores to {error:.1e} of the largest")
    return 0 if error < 1e-5 else 1


def CheckExports(binary):
    """Exports every small model with tools/onnx_export; ONNX's full check on each."""
    models = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "models"))
    failed = 0
    with tempfile.TemporaryDirectory() as folder:
        for name, params in SMALL_MODELS.items():
            config, path = os.path.join(folder, name + ".yaml"), os.path.join(folder, name + ".onnx")
            with open(config, "w") as f:
                f.write(f"model:\n  file: {models}/{name.replace('_bilinear', '')}.yaml\n"
                        f"  params: {params[:-1]}, channels: 1, size: 32, classes: 10}}\n"
                        "data: {dataset: fashion_mnist, path: /usr/share/datasets/fashion-mnist, "
                        "batch: 4, augment: {crop: 32, pad: 2}}\nrun: {steps: 1}\n")
            run = subprocess.run([binary, "--config", config, "--output", path],
                                 capture_output=True, text=True)
            if run.returncode != 0:
                print(f"{name}: onnx_export failed: {run.stderr.strip()}")
                failed += 1
                continue
            model = onnx.load(path)
            try:
                onnx.checker.check_model(model, full_check=True)
                onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
            except Exception as e:  # onnx's checker and inference raise their own kinds
                print(f"{name}: {e}")
                failed += 1
                continue
            ops = sorted({n.op_type for n in model.graph.node})
            print(f"{name}: opset {model.opset_import[0].version}, {len(model.graph.node)} nodes, "
                  f"full check passed ({', '.join(ops)})")
        failed += CheckSequenceExport(binary, folder)
    return 1 if failed else 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--check-exports":
        return CheckExports(sys.argv[2] if len(sys.argv) > 2 else "bazel-bin/tools/onnx_export")
    folder = sys.argv[1] if len(sys.argv) > 1 else "tests/testdata/onnx"
    only = set(sys.argv[2:])  # fixture names; all of them when none
    os.makedirs(folder, exist_ok=True)
    ExportZeroInPlace()
    torch.manual_seed(0)
    # Different opsets cover the versions the importer reads (11-17).
    fixtures = [("resnet18", lambda: Export("resnet18", ResNet18(), folder, 13)),
                ("vgg11", lambda: Export("vgg11", Vgg11(), folder, 11)),
                ("inception", lambda: Export("inception", Inception(), folder, 17)),
                ("dense_block", lambda: Export("dense_block", DenseBlock(), folder, 15))]
    fixtures += [(n, partial(lambda n: Export(n, Mobile(n), folder, 13, dynamic=True), n))
                 for n in MOBILE]
    fixtures.append(("asymmetric_pads", lambda: AsymmetricPads(folder)))
    fixtures.append(("vit", lambda: Export("vit", Vit(), folder, 17, dynamic=True)))
    fixtures.append(("swin", lambda: Export("swin", Swin(), folder, 13, dynamic=True)))
    fixtures.append(("swin_v2", lambda: Export("swin_v2", SwinV2(), folder, 13, dynamic=True)))
    fixtures.append(("swin_padded",
                     lambda: Export("swin_padded", Swin(window=3), folder, 13, dynamic=True)))
    fixtures.append(("maxvit", lambda: Export("maxvit", MaxVit(), folder, 17, dynamic=True)))
    fixtures.append(("pad_to_window", lambda: ExportPadToWindow(folder)))
    fixtures.append(("mnist_log_softmax",
                     lambda: ExportWithSeed("mnist_log_softmax", MnistNet, folder, 11)))
    fixtures.append(("pixel_softmax",
                     lambda: ExportWithSeed("pixel_softmax", PixelSoftmax, folder, 13)))
    fixtures += [(n, partial(ExportSequence, n, folder)) for n in SEQUENCES]
    unknown = only - {n for n, _ in fixtures}
    if unknown:
        sys.exit(f"onnx_fixtures.py: unknown fixtures: {', '.join(sorted(unknown))}")
    for n, write in fixtures:
        if not only or n in only:
            write()


if __name__ == "__main__":
    sys.exit(main())

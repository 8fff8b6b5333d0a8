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

For each network NAME it writes NAME.onnx and NAME.npz (arrays `input`, a
batch of two images, and `output`, PyTorch's scores for it) into the output
folder. Batch norm is exported as its own node with its running statistics
(TrainingMode.PRESERVE of a model in eval mode: not folded into the
convolutions), after a few training-mode forwards have moved the statistics
away from their initial values.

    python3 tests/testdata/onnx_fixtures.py tests/testdata/onnx     # needs python3-torch, python3-onnx
"""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision
from functools import partial
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


def main():
    folder = sys.argv[1] if len(sys.argv) > 1 else "tests/testdata/onnx"
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(0)
    # Different opsets cover the versions the importer reads (11-17).
    Export("resnet18", ResNet18(), folder, 13)
    Export("vgg11", Vgg11(), folder, 11)
    Export("inception", Inception(), folder, 17)
    Export("dense_block", DenseBlock(), folder, 15)
    for name in MOBILE:
        Export(name, Mobile(name), folder, 13, dynamic=True)


if __name__ == "__main__":
    main()

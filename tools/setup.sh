#!/usr/bin/env bash
# Installs every Debian package spill needs to build, test and train, and
# nothing it does not. Idempotent: packages already present are skipped, so
# the README's commands can call it every time. Needs root or sudo.
#
#   bash tools/setup.sh            # build, test and train dependencies
#   bash tools/setup.sh --bench    # also PyTorch, for benchmarks and cross-checks
set -euo pipefail

packages=(
  bazel-bootstrap          # Bazel 4.2.3, builds offline with third_party/ stand-ins
  g++                      # the C++ toolchain
  libeigen3-dev            # CPU math
  libyaml-cpp-dev          # network and training configs
  libopencv-core-dev       # image decoding and augmentation: core,
  libopencv-imgproc-dev    #   imgproc,
  libopencv-imgcodecs-dev  #   imgcodecs (only these three modules)
  libdnnl-dev              # oneDNN convolutions on the CPU
  libgtest-dev             # GoogleTest
  libgmock-dev             # GoogleMock matchers
  zlib1g-dev               # gzipped idx files
  libcli11-dev             # command-line flags of every tool (header-only)
  nlohmann-json3-dev       # JSON the tools write: reports, plans, logs, traces (header-only)
  libopenmpi-dev           # MPI for data-parallel training (headers, libmpi)
  openmpi-bin              # mpirun, to launch data-parallel runs and their tests
  clang-format             # the format check in tools/test.sh (tools/ci/format.sh --check)
  libonnx-dev              # ONNX import and export (the model format, its checker and shape inference)
  libprotobuf-dev          # the protobuf runtime ONNX's C++ classes are generated for
  coinor-libcbc-dev        # CBC: the exact DSA reference in the tests, the milp memory planner
  python3-numpy            # reading checkpoints from Python (tools/*.py)
  binutils                 # objdump: the GPU bundle's instruction-set check (tools/ci/check_isa.py)
  dataset-fashion-mnist    # the default training data: /usr/share/datasets/fashion-mnist
  fortunes                 # text for the character LSTM (configs/char_lstm.yaml): /usr/share/games/fortunes
  chromium                 # headless browser: the memory page test opens plan's pages in it
)
if [[ "${1:-}" == "--bench" ]]; then
  packages+=(python3-torch)  # the peer for benchmarks and cross-checks; never a dependency
  packages+=(python3-yaml)   # tools/bench/train_torch.py reads the training configs
  packages+=(python3-onnx)   # tests/testdata/onnx_fixtures.py: torch.onnx.export needs it
  packages+=(python3-torchvision)  # tools/bench/torchvision_onnx.py: the model zoo to import
  # Debian's PyTorch multiplies matrices through libblas.so.3, the reference
  # BLAS unless OpenBLAS provides it (about 20x slower on nn.Linear, nn.LSTM):
  # the peer at its usual speed. The OpenMP build, not the pthread one, whose
  # threads spin in every process that loads LAPACK (spill's, through OpenCV).
  packages+=(libopenblas0-openmp)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

sudo=""
if [[ $(id -u) -ne 0 ]]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: need root or sudo to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Refresh the package lists only when an install fails for want of them.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/spill-setup.log 2>&1; then
  $sudo apt-get update >>/tmp/spill-setup.log 2>&1
  if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/spill-setup.log 2>&1; then
    echo "setup: apt-get failed; see /tmp/spill-setup.log" >&2
    tail -20 /tmp/spill-setup.log >&2
    exit 1
  fi
fi

#!/usr/bin/env bash
# Packs what a GPU machine without Bazel, yaml-cpp or oneDNN needs to run the
# CUDA tests and the synthetic-data tools (bench_train, deepest, widest):
# builds with --config=cuda and copies the binaries and the shared libraries
# they load that such a machine lacks (everything but glibc, the C++ runtime
# and the CUDA libraries) into .carry/gpu/ (about 50 MB). `train` is left
# out: OpenCV and its dependencies would add over 200 MB.
#
#   bash tools/gpu_bundle.sh
#   # then, on the GPU machine, from the repository root:
#   bash tools/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=.carry/gpu
tests=(cuda_layers_test cuda_runtime_test)
tools=(bench_train deepest widest)
targets=()
for t in "${tests[@]}"; do targets+=("//tests:$t"); done
for t in "${tools[@]}"; do targets+=("//tools:$t"); done
bazel build --config=cuda "${targets[@]}"
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for t in "${tests[@]}"; do cp -L "bazel-bin/tests/$t" "$out/bin/"; done
for t in "${tools[@]}"; do cp -L "bazel-bin/tools/$t" "$out/bin/"; done
# Libraries the GPU machine provides itself: glibc, the C++ runtime, CUDA.
system='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnvidia.*)\.so'
for bin in "$out"/bin/*; do
  ldd "$bin" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    if [[ ! "$name" =~ $system && ! -e "$out/lib/$name" ]]; then
      cp -L "$path" "$out/lib/$name"
    fi
  done
done
du -sh "$out"

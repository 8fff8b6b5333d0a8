#!/usr/bin/env bash
# Packs what a GPU machine without Bazel, yaml-cpp or oneDNN needs to run the
# CUDA tests and the synthetic-data tools (bench_train, deepest, widest):
# builds with --config=cuda --config=portable and copies the binaries and the
# shared libraries they load that such a machine lacks (everything but glibc,
# the C++ runtime and the CUDA libraries) into .carry/gpu/ (about 50 MB).
# `train` is left out: OpenCV and its dependencies would add over 200 MB.
#
# The binaries are built for x86-64-v3 (AVX2, FMA), not for this machine
# (-march=native, AVX-512 here): a GPU host without AVX-512 would die with
# SIGILL. tools/ci/check_isa.py then proves it with objdump - the bundle is
# refused if any binary holds an AVX-512 instruction - and reports on the
# copied libraries, which choose their code by the processor at run time.
#
#   bash tools/ci/gpu_bundle.sh
#   bash tools/ci/gpu_check.sh --dry-run   # the device calls that use it
set -euo pipefail
cd "$(dirname "$0")/../.."
out=.carry/gpu
tests=(cuda_layers_test cuda_runtime_test)
tools=(bench/bench_train deepest widest)  # paths under bazel-bin/tools
targets=(//tools/bench:bench_train //tools:deepest //tools:widest)
for t in "${tests[@]}"; do targets+=("//tests:$t"); done
config=(--config=cuda --config=portable)
bazel build "${config[@]}" "${targets[@]}"
bazel_bin=$(bazel info "${config[@]}" bazel-bin 2>/dev/null)
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for t in "${tests[@]}"; do cp -L "$bazel_bin/tests/$t" "$out/bin/"; done
for t in "${tools[@]}"; do cp -L "$bazel_bin/tools/$t" "$out/bin/"; done
# Libraries the GPU machine provides itself: glibc, the C++ runtime, CUDA.
system='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnvidia.*)\.so'
for bin in "$out"/bin/*; do
  ldd "$bin" | awk '/=> \//{print $1, $3}' | while read -r name path; do
    if [[ ! "$name" =~ $system && ! -e "$out/lib/$name" ]]; then
      cp -L "$path" "$out/lib/$name"
    fi
  done
done
# Every binary must load from the bundle alone, with CUDA's libraries.
source tools/ci/gpu_env.sh
if ! LD_LIBRARY_PATH="$PWD/$out/lib:/usr/local/cuda/lib64" spill_check_libraries "$out"/bin/*; then
  rm -rf "$out"
  echo "gpu_bundle: a binary needs a library the bundle lacks; not bundled" >&2
  exit 1
fi
echo "instruction sets (objdump):"
if ! python3 tools/ci/check_isa.py "$out"/bin/*; then
  rm -rf "$out"
  echo "gpu_bundle: AVX-512 in the bundle's binaries; not bundled" >&2
  exit 1
fi
python3 tools/ci/check_isa.py --report-only "$out"/lib/*
du -sh "$out"

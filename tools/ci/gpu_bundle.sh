#!/usr/bin/env bash
# Packs what a GPU machine without Bazel, yaml-cpp or oneDNN needs to run the
# CUDA tests and the synthetic-data tools (bench_train, deepest, widest):
# builds with --config=cuda --config=portable and copies the binaries and the
# shared libraries they load that such a machine lacks (everything but glibc,
# the C++ runtime and the CUDA libraries) into .carry/gpu/, then compresses
# that to .carry/gpu.tar.xz - what travels to the GPU machine with the
# sources (tools/ci/gpu_check.sh unpacks it there). Prints the compressed
# size and fails above kLimitMiB: the sources and the bundle must fit one
# transfer. `train` is left out: OpenCV and its dependencies would add over
# 200 MB.
#
# The binaries are built for x86-64-v3 (AVX2, FMA), not for this machine
# (-march=native, AVX-512 here): a GPU host without AVX-512 would die with
# SIGILL. tools/ci/check_isa.py then proves it with objdump - the bundle is
# refused if any binary holds an AVX-512 instruction - and reports on the
# copied libraries, which choose their code by the processor at run time.
#
#   bash tools/ci/gpu_bundle.sh
#   bash tools/ci/gpu_check.sh --dry-run   # the device calls that use it
#   bash tools/ci/gpu_bundle.sh --pack DIR BINARY...
#       packs, checks and compresses these binaries into DIR and DIR.tar.xz
#       without building (the test run does this with the binaries of its
#       own CUDA build, to show the bundle's size in CI's log; no ISA check)
set -euo pipefail
cd "$(dirname "$0")/../.."
kLimitMiB=40
# Libraries the GPU machine provides itself: glibc, the C++ runtime, CUDA.
system='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnvidia.*)\.so'

# pack DIR BINARY...: the binaries and the libraries they need into DIR;
# fails when a binary would not load from DIR with CUDA's libraries.
pack() {
  local out=$1
  shift
  rm -rf "$out" "$out.tar.xz"
  mkdir -p "$out/bin" "$out/lib"
  cp -L "$@" "$out/bin/"
  chmod u+w "$out"/bin/*
  # Libraries as the built binaries find them (a test build's binaries load
  # the project's own from Bazel's output tree).
  local bin name path
  for bin in "$@"; do
    while read -r name path; do
      if [[ ! "$name" =~ $system && ! -e "$out/lib/$name" ]]; then
        cp -L "$path" "$out/lib/$name"
      fi
    done < <(ldd "$bin" | awk '/=> \//{print $1, $3}')
  done
  source tools/ci/gpu_env.sh
  local report
  if ! report=$(LD_LIBRARY_PATH="$(cd "$out" && pwd)/lib:/usr/local/cuda/lib64" \
    spill_check_libraries "$out"/bin/*); then
    echo "$report" >&2
    rm -rf "$out"
    echo "gpu_bundle: a binary needs a library the bundle lacks; not bundled" >&2
    return 1
  fi
}

# compress DIR: DIR.tar.xz, its size printed; fails above kLimitMiB.
# SPILL_BUNDLE_XZ_LEVEL (default 6) trades time for size: the test packs at
# level 1, whose larger bundle passing the limit means level 6's does too.
compress() {
  local out=$1
  XZ_OPT="-${SPILL_BUNDLE_XZ_LEVEL:-6} -T0" tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
  local packed unpacked name=$out.tar.xz
  [[ $name == /* ]] && name=$(basename "$name")
  packed=$(stat -c %s "$out.tar.xz")
  unpacked=$(du -sb "$out" | cut -f1)
  awk -v p="$packed" -v u="$unpacked" -v limit="$kLimitMiB" -v f="$name" 'BEGIN {
    printf "gpu bundle: %s is %.1f MiB compressed (%.1f MiB unpacked; limit %d MiB)\n",
      f, p / 1048576, u / 1048576, limit }'
  if ((packed > kLimitMiB * 1048576)); then
    echo "gpu_bundle: the compressed bundle exceeds $kLimitMiB MiB" >&2
    return 1
  fi
}

if [[ ${1:-} == --pack ]]; then
  [[ $# -ge 3 ]] || { echo "usage: gpu_bundle.sh --pack DIR BINARY..." >&2; exit 2; }
  out=$2
  shift 2
  pack "$out" "$@"
  compress "$out"
  exit 0
fi

out=.carry/gpu
tests=(cuda_layers_test cuda_runtime_test)
tools=(bench/bench_train deepest widest)  # paths under bazel-bin/tools
targets=(//tools/bench:bench_train //tools:deepest //tools:widest)
for t in "${tests[@]}"; do targets+=("//tests:$t"); done
config=(--config=cuda --config=portable)
bazel build "${config[@]}" "${targets[@]}"
bazel_bin=$(bazel info "${config[@]}" bazel-bin 2>/dev/null)
binaries=()
for t in "${tests[@]}"; do binaries+=("$bazel_bin/tests/$t"); done
for t in "${tools[@]}"; do binaries+=("$bazel_bin/tools/$t"); done
pack "$out" "${binaries[@]}"
echo "instruction sets (objdump):"
if ! python3 tools/ci/check_isa.py "$out"/bin/*; then
  rm -rf "$out"
  echo "gpu_bundle: AVX-512 in the bundle's binaries; not bundled" >&2
  exit 1
fi
python3 tools/ci/check_isa.py --report-only "$out"/lib/*
compress "$out"

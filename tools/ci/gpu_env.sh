# Sourced by tools/ci/gpu_check.sh: where the bundle's binaries find the CUDA
# libraries on a GPU machine that has no CUDA toolkit of spill's build, only
# the driver and what Python's CUDA wheels brought.
#
# The wheels keep their libraries under site-packages/nvidia/:
#   CUDA 13: nvidia/cu13/lib (cudart, cuBLAS, nvrtc, ...), nvidia/cudnn/lib
#   CUDA 12: nvidia/cuda_runtime/lib, nvidia/cublas/lib, nvidia/cudnn/lib,
#            nvidia/cuda_nvrtc/lib, nvidia/nvjitlink/lib, ...
# The libraries' major versions are in their file names (libcublas.so.13),
# so the wheels of both CUDA versions can share the path: each binary loads
# the major version it was linked against. Which minor version and which
# cuDNN build a binary then gets is reported by the CUDA device at start
# (framework/cuda/cuda_versions.h), an error where a major version differs.
#
# Order of the search path: the bundle's own libraries; the wheels (CUDA 13's
# folder first, then cuDNN, cuBLAS, the runtime, nvrtc and nvJitLink, then
# any other nvidia/*/lib); a toolkit at $CUDA_HOME or /usr/local/cuda;
# whatever LD_LIBRARY_PATH held before.

# Prints the library folders of the CUDA pip wheels that python3 can see,
# one per line, in search order.
spill_wheel_library_dirs() {
  command -v python3 >/dev/null || return 0
  python3 - <<'EOF'
import glob, os, site, sys

roots = list(sys.path)
try:
    roots += site.getsitepackages() + [site.getusersitepackages()]
except AttributeError:  # a virtualenv's old site module
    pass
try:
    import nvidia  # a namespace package: one path per site-packages
    roots += [os.path.dirname(p) for p in nvidia.__path__]
except ImportError:
    pass
first = ["cu13", "cudnn", "cublas", "cuda_runtime", "cuda_nvrtc", "nvjitlink"]
seen = set()
for root in roots:
    base = os.path.join(root or ".", "nvidia")
    if not os.path.isdir(base):
        continue
    found = sorted(glob.glob(os.path.join(base, "*", "lib")))
    found.sort(key=lambda d: first.index(os.path.basename(os.path.dirname(d)))
               if os.path.basename(os.path.dirname(d)) in first else len(first))
    for d in found:
        d = os.path.realpath(d)
        if d not in seen:
            seen.add(d)
            print(d)
EOF
}

# Prints the whole search path for the bundle at $1, ':'-separated.
spill_cuda_library_path() {
  local bundle=$1 dirs=() d
  [[ $bundle == /* ]] || bundle=$PWD/$bundle
  dirs+=("$bundle/lib")
  while IFS= read -r d; do dirs+=("$d"); done < <(spill_wheel_library_dirs)
  for d in "${CUDA_HOME:-/usr/local/cuda}/lib64" /usr/local/cuda/lib64 \
    /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -d $d && " ${dirs[*]} " != *" $d "* ]] && dirs+=("$d")
  done
  local IFS=:
  echo "${dirs[*]}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
}

# For each binary: which file every CUDA library resolves to; non-zero, with
# the missing names, when any library of any binary is not found.
spill_check_libraries() {
  local status=0 bin missing
  for bin in "$@"; do
    missing=$(ldd "$bin" 2>&1 | awk '/not found/{print $1}' | sort -u | tr '\n' ' ')
    if [[ -n $missing ]]; then
      echo "$(basename "$bin"): not found: $missing"
      status=1
    fi
  done
  if [[ $# -gt 0 ]]; then
    ldd "$1" | grep -E 'libcuda\.|libcudart|libcublas|libcudnn' | sed 's/^[[:space:]]*/  /'
  fi
  return $status
}

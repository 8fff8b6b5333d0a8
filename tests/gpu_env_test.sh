#!/usr/bin/env bash
# tools/ci/gpu_env.sh finds the library folders of the CUDA 13 and CUDA 12 pip
# wheels wherever python3 sees a site-packages folder, CUDA 13's and cuDNN's
# first, after the bundle's own libraries; and it names the libraries a
# binary cannot load.
set -uo pipefail
env_script=$1
site=${TEST_TMPDIR:-$(mktemp -d)}/site-packages
for wheel in cu13 cudnn cublas cuda_runtime cuda_nvrtc nvjitlink cufft; do
  mkdir -p "$site/nvidia/$wheel/lib"
done
mkdir -p "$site/nvidia/no_libs"
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

source "$env_script"
dirs=$(PYTHONPATH=$site spill_wheel_library_dirs)
echo "wheel folders:"
echo "$dirs"
expected="cu13 cudnn cublas cuda_runtime cuda_nvrtc nvjitlink cufft"
got=$(echo "$dirs" | grep "^$(realpath "$site")/" | sed 's|.*/nvidia/\([^/]*\)/lib$|\1|' | tr '\n' ' ')
[[ $got == "$expected " ]] || fail "order: got '$got', expected '$expected '"

path=$(cd "$(mktemp -d)" && PYTHONPATH=$site LD_LIBRARY_PATH=/earlier spill_cuda_library_path .carry/gpu)
echo "library path: $path"
[[ $path == */.carry/gpu/lib:* ]] || fail "the bundle's libraries do not come first"
[[ $path == *"$(realpath "$site")/nvidia/cu13/lib:"* ]] || fail "no CUDA 13 wheel folder"
[[ $path == *:/earlier ]] || fail "the earlier LD_LIBRARY_PATH is not kept last"

# A binary with a library that cannot be found.
if report=$(LD_LIBRARY_PATH=/nonexistent spill_check_libraries /bin/true); then
  echo "loadable: ok"
else
  fail "/bin/true reported unloadable: $report"
fi
# A program linked against a library that is then removed.
scratch=$(mktemp -d)
echo 'int spill_missing(void) { return 0; }' >"$scratch/missing.c"
echo 'int spill_missing(void); int main(void) { return spill_missing(); }' >"$scratch/main.c"
if cc -shared -fPIC -o "$scratch/libspill_missing.so" "$scratch/missing.c" &&
  cc -o "$scratch/needs_missing" "$scratch/main.c" -L"$scratch" -lspill_missing; then
  rm "$scratch/libspill_missing.so"
  if report=$(spill_check_libraries "$scratch/needs_missing"); then
    fail "a missing library went unreported"
  else
    echo "unloadable: $report"
    grep -q "needs_missing: not found: libspill_missing.so" <<<"$report" ||
      fail "the missing library is not named: $report"
  fi
else
  fail "could not build the program for the missing-library check"
fi
[[ $failures -eq 0 ]] && echo "all checks passed"
exit $((failures > 0))

#!/usr/bin/env bash
# Runs on a GPU machine, from the repository root, with the bundle that
# tools/gpu_bundle.sh made: the CUDA test suite, the memory tests on the GPU
# build, a short training run under compute-sanitizer, and the GPU
# benchmarks. Results go to ${OUT:-gpu_results}/.
#
#   bash tools/gpu_check.sh [tests|sanitize|bench|all]
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
bundle=.carry/gpu
results=${OUT:-gpu_results}
mkdir -p "$results"
cudnn=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(nvidia.cudnn.__path__[0], "lib"))' 2>/dev/null)
export LD_LIBRARY_PATH="$PWD/$bundle/lib:/usr/local/cuda/lib64:${cudnn}:${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$results/gpu.txt"
ldd "$bundle/bin/cuda_layers_test" | grep -E "not found|cudnn|cublas|cudart" | tee -a "$results/gpu.txt"

if [[ $what == tests || $what == all ]]; then
  for t in cuda_layers_test cuda_runtime_test; do
    "$bundle/bin/$t" --gtest_output="xml:$results/$t.xml" 2>&1 | tail -40 | tee "$results/$t.txt"
  done
fi
if [[ $what == sanitize || $what == all ]]; then
  # A few synthetic steps of a small ResNet in the tightest mode, every
  # kernel and copy checked for out-of-bounds and misaligned accesses.
  compute-sanitizer --tool memcheck --error-exitcode 3 \
    "$bundle/bin/bench_train" --config models/resnet18.yaml --set stem=cifar --set size=32 \
    --set classes=10 --device cuda \
    --memory superneurons --minimum --batch 32 --steps 3 --warmup 1 2>&1 | tail -30 | tee "$results/memcheck.txt"
fi
if [[ $what == bench || $what == all ]]; then
  # The paper's experiments on a 12 GiB device budget.
  # Planned with cuDNN's workspaces, then confirmed by two training steps.
  for mode in liveness superneurons; do
    "$bundle/bin/widest" --config models/resnet50.yaml --device cuda --device-memory 12GiB \
      --memory "$mode" --confirm 2 2>&1 | tail -3 | tee -a "$results/widest.txt"
    "$bundle/bin/deepest" --device cuda --device-memory 12GiB --batch 16 \
      --memory "$mode" --confirm 2 2>&1 | tail -3 | tee -a "$results/deepest.txt"
  done
  # ResNet-50 at 224x224, batch 64, against PyTorch on the same GPU with
  # the same network and initial weights.
  for mode in baseline liveness superneurons; do
    "$bundle/bin/bench_train" --config models/resnet50.yaml --device cuda --device-memory 40GiB \
      --memory "$mode" --batch 64 --steps 20 --export /tmp/resnet50_export 2>&1 | tail -3 \
      | tee -a "$results/bench_resnet50.txt"
  done
  python3 tools/bench_torch.py /tmp/resnet50_export --steps 20 --device cuda 2>&1 \
    | tail -3 | tee -a "$results/bench_resnet50.txt"
fi

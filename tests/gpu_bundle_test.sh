#!/usr/bin/env bash
# The GPU bundle (tools/ci/gpu_bundle.sh --pack) of this build's CUDA
# binaries - the tests and the tools a GPU session runs: every binary loads
# from the bundle's libraries and CUDA's, and the compressed bundle stays
# under the limit of one transfer. The size line it prints ("gpu bundle:
# ... MiB compressed") is what tools/test.sh shows in CI's log. The bundle
# of record is built for x86-64-v3 (--config=portable) by gpu_bundle.sh
# itself; this one has this machine's instruction set, and the same files.
set -euo pipefail
bundle=${TEST_TMPDIR:-$(mktemp -d)}/gpu
# The fastest compression: a bundle under the limit at level 1 is under it
# at gpu_bundle.sh's level 6 too (on two cores, level 6 took minutes).
SPILL_BUNDLE_XZ_LEVEL=1 bash tools/ci/gpu_bundle.sh --pack "$bundle" "$@"
test -x "$bundle/bin/cuda_runtime_test"
test -s "$bundle.tar.xz"

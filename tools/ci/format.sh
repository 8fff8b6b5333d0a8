#!/usr/bin/env bash
# Formats every C++ and CUDA source with the repository's .clang-format
# (clang-format 14, Debian's), or checks that nothing would change.
#
#   bash tools/ci/format.sh            # rewrite the files in place
#   bash tools/ci/format.sh --check    # list the files that differ; exit 1 if any
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is not installed (bash tools/setup.sh)" >&2
  exit 2
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard \
    '*.cc' '*.h' '*.cu' '*.cuh' | while read -r f; do [[ -f "$f" ]] && echo "$f"; done)
else
  mapfile -t files < <(find . -path ./bazel-\* -prune -o \
    \( -name '*.cc' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print | sed 's|^\./||')
fi
if [[ "${1:-}" != "--check" ]]; then
  clang-format -i --style=file "${files[@]}"
  exit 0
fi
differ=()
for f in "${files[@]}"; do
  if ! clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    differ+=("$f")
  fi
done
if [[ ${#differ[@]} -gt 0 ]]; then
  echo "format: ${#differ[@]} of ${#files[@]} files differ from .clang-format (fix: bash tools/ci/format.sh):" >&2
  printf '  %s\n' "${differ[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files match .clang-format"

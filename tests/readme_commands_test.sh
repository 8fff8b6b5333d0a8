#!/usr/bin/env bash
# Every command in README.md runs as written: scripts and programs exist,
# every flag is one the program takes, every file it names is there, and the
# commands that take seconds run and succeed (tools/ci/readme_commands.py).
set -euo pipefail
exec /usr/bin/python3 tools/ci/readme_commands.py --root "$PWD" --bin "$PWD" README.md

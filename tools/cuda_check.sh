#!/usr/bin/env bash
# The CUDA check in one command (tools/cuda_check.py says what it runs and where results go).
#   tools/cuda_check.sh [--dry-run] [--results DIR] [--jobs N]
# Uses $PYTHON, else python3: the interpreter whose torch is to be checked.
set -euo pipefail
cd "$(dirname "$0")/.."
exec "${PYTHON:-python3}" tools/cuda_check.py "$@"

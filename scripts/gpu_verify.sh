#!/usr/bin/env bash
# One prepared command for the GPU check of `gpulint verify` (issue 5): runs verify on every fixture
# training script at --size gpu on CUDA and writes docs/verification.json and docs/verification.md
# (date, GPU, torch, numbers, targets). Extra arguments go to scripts/gpu_verify.py
# (e.g. --only "mixed precision", --timeout 300, --out-dir /tmp/out).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ "$PYTHON" = python ]; then PYTHON=.venv/bin/python; fi
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_verify.sh: torch.cuda.is_available() is False on this machine')"
exec "$PYTHON" scripts/gpu_verify.py "$@"

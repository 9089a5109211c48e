#!/usr/bin/env bash
# One prepared command for the GPU check of `gpulint verify` (issues 5 and 13): runs verify on every fixture
# training script at --size gpu on CUDA, the DDP fixture through torchrun (2 processes when the machine has
# 2 GPUs, else 1), then fixes and runs every fixtures/runtime script (each must still train), and writes
# docs/verification.json and docs/verification.md (date, GPU, torch, numbers, targets). Extra arguments go to scripts/gpu_verify.py (e.g. --only "mixed precision", --timeout 300,
# --repeats 5, --out-dir /tmp/out).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python}"
if [ -x .venv/bin/python ] && [ "$PYTHON" = python ]; then PYTHON=.venv/bin/python; fi
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'gpu_verify.sh: torch.cuda.is_available() is False on this machine')"
echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
"$PYTHON" - <<'PY'
import platform, torch
names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
print(f"gpus: {len(names)} x {', '.join(sorted(set(names)))}")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}, "
      f"NCCL {'.'.join(map(str, torch.cuda.nccl.version())) if torch.distributed.is_nccl_available() else '-'}, "
      f"Python {platform.python_version()}")
PY
exec "$PYTHON" scripts/gpu_verify.py "$@"

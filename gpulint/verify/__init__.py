"""`gpulint verify`: run a training script and its rewrite side by side, compare speed, memory and loss.

Nothing here imports torch at import time: torch is loaded only in the harness subprocess
(`python -m gpulint.verify.harness`), so `gpulint check` works without it.
"""

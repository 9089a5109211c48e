"""`gpulint verify`: run a training script and its rewrite side by side, compare speed, memory and loss.

The command itself never imports torch: the runs happen in subprocesses (`python -m
gpulint.verify.harness`), and only the modules those load (harness.py, devicemap.py,
memory.py) import it. tests/verify/test_cli.py checks that importing the command loads no torch.
"""

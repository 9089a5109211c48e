"""Torch's API as the rules read it: qualified names, argument positions (issue 25: knowledge in one place).

Version floors stay in core/floors.py (what a fix may write for a project's torch); this module says
what torch calls things and where an argument sits when it is passed by position. Sections are per
subject; others append theirs below, each headed with a comment.
"""

from __future__ import annotations

# ------------------------------------------------------------------------------------------------
# optimizers (GPU201)
# ------------------------------------------------------------------------------------------------

# the optimizers with a fused kernel, by class name (the floor of each: core/floors.py `fused(name)`)
FUSED_CAPABLE = ("Adam", "AdamW", "SGD", "Adagrad")
# qualified name -> class name, through the public module and the one that defines the class
OPTIMIZER_CLASSES: dict[str, str] = {
    **{f"torch.optim.{name}": name for name in FUSED_CAPABLE},
    "torch.optim.adam.Adam": "Adam",
    "torch.optim.adamw.AdamW": "AdamW",
    "torch.optim.sgd.SGD": "SGD",
    "torch.optim.adagrad.Adagrad": "Adagrad",
}
OPTIMIZER_PARAMS = ("params", 0)  # every torch optimizer: (params, ...)
SGD_MOMENTUM = ("momentum", 2)  # SGD(params, lr, momentum, dampening, weight_decay, nesterov)

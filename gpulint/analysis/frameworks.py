"""Is this torch code? The premise every rule shares whose pattern other deep-learning frameworks spell alike.

A training step is read from method names (`loss.backward()`, `optimizer.step()`, `loss.item()`), and
PaddlePaddle, OneFlow or MXNet spell those the same; their mixed precision (`paddle.amp.auto_cast`,
`paddle.amp.GradScaler`) is not torch's, so gpulint cannot see it, and advice naming `torch.autocast` is wrong
there. The evidence is the file's own imports (project/facts.py `FileFacts.other_framework`; the list of
frameworks is `OTHER_FRAMEWORKS` there), read before parsing. Rules whose pattern is a torch name resolved
through the imports (`torch.utils.data.DataLoader`, `torch.optim.Adam`, `torch.utils.checkpoint`) need no
such premise: in a file that never imports torch those names do not resolve.
"""

from __future__ import annotations

from gpulint.analysis.evidence import REFUTED, SHOWN, Evidence, Premise
from gpulint.project.view import ProjectView

TORCH_CODE = Premise(
    "torch-code",
    "the code is torch's: refuted where the file imports another deep-learning framework (PaddlePaddle, "
    "TensorFlow, JAX or Flax, MindSpore, OneFlow, MXNet, MegEngine), at module level or inside a function, and "
    "imports torch nowhere (no `import torch` or `from torch... import`, in functions either): its "
    "`loss.backward()` and `optimizer.step()` read like torch's, but its tensors, devices and mixed precision "
    "(`paddle.amp.auto_cast`, whose GradScaler scales the loss) are that framework's, and torch's advice does "
    "not apply (blind22: RT-DETR's PaddlePaddle trainer). A file that imports neither (a train.py whose model "
    "and helpers come from project modules) counts as torch's.")


def torch_code(view: ProjectView) -> Evidence:
    """TORCH_CODE: refuted where the file imports another deep-learning framework and torch nowhere."""
    return REFUTED if view.own.other_framework else SHOWN


def other_framework(view: ProjectView) -> bool:
    """The file trains with another framework (TORCH_CODE refuted): a rule may skip it before parsing."""
    return bool(view.own.other_framework)

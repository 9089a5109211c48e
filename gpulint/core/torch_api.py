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

# ------------------------------------------------------------------------------------------------
# data loading (GPU101, GPU102; analysis/loaders.py)
# ------------------------------------------------------------------------------------------------

DATALOADER = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})
# DataLoader(dataset, batch_size, shuffle, sampler, batch_sampler, num_workers, collate_fn, pin_memory, ...)
DATALOADER_DATASET = ("dataset", 0)
DATALOADER_NUM_WORKERS = ("num_workers", 5)
DATALOADER_PIN_MEMORY = ("pin_memory", 7)
TENSOR_DATASET = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
# torch wrappers whose items are their first argument's items
DATASET_WRAPPERS = frozenset({
    "torch.utils.data.Subset", "torch.utils.data.dataset.Subset",
    "torch.utils.data.ConcatDataset", "torch.utils.data.dataset.ConcatDataset",
})
DATASET_SPLITS = frozenset({"torch.utils.data.random_split", "torch.utils.data.dataset.random_split"})

# ------------------------------------------------------------------------------------------------
# attention (GPU403; analysis/attention.py)
# ------------------------------------------------------------------------------------------------

SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax", "torch.nn.modules.activation.Softmax"})
SOFTMAX_DIM = ("dim", 1)  # F.softmax(input, dim, ...); Tensor.softmax(dim) and nn.Softmax(dim) take it first
MATMUL_FUNCTIONS = frozenset({"torch.matmul"})
EINSUM_FUNCTIONS = frozenset({"torch.einsum", "torch.functional.einsum"})
DROPOUT_FUNCTIONS = frozenset({"torch.nn.functional.dropout"})
DROPOUT_MODULES = frozenset({"torch.nn.Dropout", "torch.nn.modules.dropout.Dropout"})
# F.dropout(input, p=0.5, training=True, inplace=False)
DROPOUT_P, DROPOUT_TRAINING, DROPOUT_INPLACE = ("p", 1), ("training", 2), ("inplace", 3)
TRANSPOSE_FUNCTIONS = frozenset({"torch.transpose"})
TRIL_FUNCTIONS = frozenset({"torch.tril"})
ONES_FUNCTIONS = frozenset({"torch.ones", "torch.ones_like"})
FINFO = frozenset({"torch.finfo"})
SDPA_MODULE, SDPA_NAME = "torch.nn.functional", "scaled_dot_product_attention"

# ------------------------------------------------------------------------------------------------
# image augmentation (GPU106; analysis/augmentation.py): torchvision and albumentations, not torch
# ------------------------------------------------------------------------------------------------

TORCHVISION_TRANSFORMS = (
    "torchvision.transforms.", "torchvision.transforms.v2.", "torchvision.transforms.transforms.",
    "torchvision.transforms.v2._color.", "torchvision.transforms.v2._geometry.",
    "torchvision.transforms.v2._auto_augment.", "torchvision.transforms.autoaugment.",
)
COMPOSE = frozenset({"torchvision.transforms.Compose", "torchvision.transforms.v2.Compose",
                     "torchvision.transforms.transforms.Compose", "albumentations.Compose",
                     "albumentations.core.composition.Compose"})
# ops that cost about a JPEG decode or more per image on CPU (bench/augmentation_cpu_cost.py)
HEAVY_TORCHVISION = frozenset({"ColorJitter", "GaussianBlur", "AugMix", "ElasticTransform", "RandomPerspective",
                               "RandAugment"})
HEAVY_ALBUMENTATIONS = frozenset({"ElasticTransform", "GridDistortion", "OpticalDistortion"})

"""GPU106 cpu-heavy-augmentation: per-sample image augmentation on the CPU feeding a GPU step (preview)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpulint.analysis.augmentation import pipelines
from gpulint.analysis.device import cuda_evidence
from gpulint.analysis.evidence import SHOWN, UNDECIDED, Premise
from gpulint.core.torch_api import COMPOSE
from gpulint.rules.base import Rule, RuleDocs, Target

if TYPE_CHECKING:
    from gpulint.analysis.ast_context import AstContext

HEAVY = Premise(
    "heavy-augmentation",
    "the pipeline (a torchvision or albumentations Compose, read through lists held in names and through "
    "RandomApply/RandomChoice/OneOf) holds an op that costs about as much as decoding the image or more, as "
    "measured on CPU: ColorJitter, GaussianBlur, AugMix, ElasticTransform, RandomPerspective, RandAugment; "
    "albumentations' ElasticTransform, GridDistortion, OpticalDistortion.")
FEEDS_GPU_STEP = Premise(
    "feeds-gpu-step",
    "a DataLoader loads the dataset the pipeline is given to (followed from the loader through names, self "
    "attributes, factories and Subset/random_split), in a file that runs a training step (calls backward() "
    "and steps an optimizer); in a file without one, undecided. A pipeline no loader of the file loads is "
    "not read at all.")
ON_GPU = Premise(
    "on-gpu",
    "the step runs on a CUDA GPU, where Kornia, DALI or torchvision's v2 transforms can augment the batch: "
    "shown by CUDA evidence in the file or a caller; refuted where the code pins the CPU, a TPU, MPS or XPU.")


class CpuHeavyAugmentation(Rule):
    code = "GPU106"
    name = "cpu-heavy-augmentation"
    habit = "gpu-augmentation"
    summary = "Per-sample image augmentation on the CPU (ColorJitter, GaussianBlur, RandAugment...) feeding a GPU"
    impact = ("per image on CPU: ColorJitter 23 ms, GaussianBlur(23) 175 ms, decode 4.4 ms "
              "(bench/augmentation_cpu_cost.py)")
    needles = ("Compose",)
    ast_needles = (tuple(sorted(COMPOSE)),)
    target = Target.NOT_CPU_ONLY
    preview = True
    in_tests = False
    docs = RuleDocs(
        what="""
        Checks for torchvision (`transforms` or `transforms.v2`) and albumentations
        `Compose([...])` pipelines holding a heavy random augmentation, given to a dataset
        whose `DataLoader` feeds a training step on a CUDA GPU in the same file. Reported at
        the `Compose`, naming the heavy ops; there is no automatic fix.

        Heavy, measured on CPU: `ColorJitter`, `GaussianBlur`, `AugMix`, `ElasticTransform`,
        `RandomPerspective`, `RandAugment`; albumentations' `ElasticTransform`,
        `GridDistortion`, `OpticalDistortion` (not measured: the same warps). Not reported
        for pipelines of cheap ops only: `ToTensor`, `Normalize`, flips, `RandomCrop`,
        `RandomResizedCrop` (it crops before it resizes), `RandomRotation`, `RandomAffine`,
        `AutoAugment`, `TrivialAugmentWide`, `RandomGrayscale`, `RandomErasing`; nor for
        validation pipelines without random ops, the file's own `Compose`, pipelines that
        never reach a DataLoader in the file, files that run no training step, CPU-only
        files and test code.
        """,
        why="""
        A Dataset augments one image at a time in the loader's worker processes; when that
        costs more than the GPU's step per image, the GPU waits on the CPU however many
        workers there are. Measured on CPU (torch 2.13, torchvision 0.28, a 500x375 RGB PIL
        image, one thread, medians on a busy 2-core machine; bench/augmentation_cpu_cost.py):
        decoding the JPEG 4.4 ms, ColorJitter(0.4, 0.4, 0.4, 0.1) 23 ms, GaussianBlur(23)
        175 ms, AugMix 115 ms, ElasticTransform 169 ms, RandomPerspective 14 ms, RandAugment
        4.0 ms; RandomResizedCrop 0.95 ms, RandomCrop and flips under 0.1 ms. At 23 ms an
        image, 8 workers prepare about 350 images a second with ColorJitter alone, while one
        V100 trains a ResNet-50 with AMP on about 1,150 (a batch of 128 in 111 ms, as measured
        in the README of sandeepkumar-skb/pytorch_experiments). On the GPU the same op runs
        once per batch: the guide this linter follows says to "move augmentations to the GPU
        (DALI, Kornia)".
        """,
        example="""
        import torch
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        augment = T.Compose([T.RandomResizedCrop(224), T.ColorJitter(0.4, 0.4, 0.4), T.ToTensor()])
        loader = DataLoader(ImageFolder("train", transform=augment), batch_size=256, num_workers=8)
        model = torch.nn.Linear(10, 10).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for images, labels in loader:
            model(images.cuda()).sum().backward()
            optimizer.step()
        """,
        use_instead="""
        import kornia.augmentation as K
        import torch
        import torchvision.transforms as T
        from torch.utils.data import DataLoader
        from torchvision.datasets import ImageFolder

        # decode, crop and resize stay per image on the CPU; colour work runs per batch on the GPU
        decode = T.Compose([T.RandomResizedCrop(224), T.ToTensor()])
        loader = DataLoader(ImageFolder("train", transform=decode), batch_size=256, num_workers=8)
        gpu_augment = K.ColorJitter(0.4, 0.4, 0.4, p=1.0)  # per-sample parameters, one batched kernel
        model = torch.nn.Linear(10, 10).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for images, labels in loader:
            images = gpu_augment(images.cuda(non_blocking=True))
            model(images).sum().backward()
            optimizer.step()
        """,
        fix_safety="""
        No fix: moving augmentation changes the data pipeline's structure (a batch of equal
        sizes before the GPU ops, the random streams, which ops draw per-sample parameters).
        Keep decoding and the size-changing crop on the CPU and run the heavy ops on the
        batch after `.to(device)`: Kornia's `kornia.augmentation` draws parameters per sample
        on a batch; torchvision's `transforms.v2` accepts CUDA tensors but draws one set of
        parameters per call (apply it per sample, or accept batch-level randomness); NVIDIA
        DALI moves decoding to the GPU as well.
        """,
        premises=(HEAVY, FEEDS_GPU_STEP, ON_GPU),
    )

    def detect(self, ctx: "AstContext") -> None:
        on_gpu = cuda_evidence(ctx.project)
        trains = ctx.project.own.training
        for pipeline in pipelines(ctx):
            feeds = SHOWN if trains else UNDECIDED
            decision = self.decide({HEAVY: SHOWN, FEEDS_GPU_STEP: feeds, ON_GPU: on_gpu})
            note = "keep decode and resize on the CPU; run these ops on the batch after .to(device) " \
                   "(Kornia, DALI, or torchvision.transforms.v2 on CUDA tensors)"
            ops = ", ".join(pipeline.heavy)
            ctx.report(self, pipeline.compose,
                       f"per-image CPU augmentation ({ops}) feeds a GPU step: augment the batch on the GPU instead",
                       note=note, decision=decision)

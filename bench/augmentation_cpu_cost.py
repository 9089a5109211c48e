"""GPU106's split between heavy and cheap augmentations: per-sample CPU time of torchvision transforms.

Each transform runs on a 500x375 RGB PIL image (the median ImageNet photo size), as a Dataset's
__getitem__ would after decoding; the decode itself is timed for reference. Prints the median
microseconds per sample over a few hundred runs, one thread. A transform counts as heavy for GPU106
when it costs about as much as decoding the JPEG or more.
Run: python bench/augmentation_cpu_cost.py [--repeats N]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from types import ModuleType
from typing import Any, Callable

import torch
from PIL import Image


def _transforms() -> ModuleType:
    """torchvision.transforms. A torchvision wheel whose C ops cannot load beside this torch (a CUDA
    build next to a CPU torch) still has its PIL transforms, which are all this measures: its fake-op
    registrations are skipped."""
    try:
        from torchvision import transforms
    except RuntimeError:
        for name in [m for m in sys.modules if m.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        torch.library.register_fake = lambda *args, **kwargs: (lambda fn: fn)  # type: ignore[assignment]
        from torchvision import transforms
    return transforms


T = _transforms()


def timed(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    pixels = (torch.rand(375, 500, 3) * 255).to(torch.uint8).numpy()
    image = Image.fromarray(pixels)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    jpeg = buffer.getvalue()
    crop = T.CenterCrop(224)(image)
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("decode JPEG (reference)", lambda: Image.open(io.BytesIO(jpeg)).convert("RGB")),
        ("ToTensor", lambda: T.ToTensor()(image)),
        ("Normalize (tensor)", lambda: T.Normalize([0.5] * 3, [0.2] * 3)(T.ToTensor()(crop))),
        ("RandomHorizontalFlip", lambda: T.RandomHorizontalFlip(1.0)(image)),
        ("RandomCrop(224)", lambda: T.RandomCrop(224)(image)),
        ("Resize(256)", lambda: T.Resize(256)(image)),
        ("RandomResizedCrop(224)", lambda: T.RandomResizedCrop(224)(image)),
        ("ColorJitter(0.4, 0.4, 0.4, 0.1)", lambda: T.ColorJitter(0.4, 0.4, 0.4, 0.1)(image)),
        ("RandomGrayscale(p=1)", lambda: T.RandomGrayscale(1.0)(image)),
        ("GaussianBlur(23)", lambda: T.GaussianBlur(23)(image)),
        ("RandomRotation(15)", lambda: T.RandomRotation(15)(image)),
        ("RandomAffine(15, (0.1, 0.1))", lambda: T.RandomAffine(15, (0.1, 0.1))(image)),
        ("RandomPerspective(p=1)", lambda: T.RandomPerspective(p=1.0)(image)),
        ("RandAugment()", lambda: T.RandAugment()(image)),
        ("AutoAugment()", lambda: T.AutoAugment()(image)),
        ("TrivialAugmentWide()", lambda: T.TrivialAugmentWide()(image)),
        ("AugMix()", lambda: T.AugMix()(image)),
        ("RandomErasing(p=1) (tensor)", lambda: T.RandomErasing(1.0)(T.ToTensor()(crop))),
        ("ElasticTransform()", lambda: T.ElasticTransform()(crop)),
    ]
    print(f"torch {torch.__version__}, one thread, 500x375 RGB PIL image (224x224 where marked tensor/Elastic)")
    for name, fn in cases:
        print(f"{name}: {timed(fn, args.repeats):.0f} us")


if __name__ == "__main__":
    main()

"""gpulint: a static linter with autofix for PyTorch training code."""

__version__ = "0.1.0"

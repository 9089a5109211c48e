"""gpulint: a static linter with autofix for PyTorch training code."""

__version__ = "0.1.0"

# read by the CLI's option parser, which must start without importing the cache
ENV_CACHE_DIR = "GPULINT_CACHE_DIR"

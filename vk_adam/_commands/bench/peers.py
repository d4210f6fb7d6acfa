"""Which peers this machine can run the bench against: torch at all, and torch on CUDA.

Its own module so that ``run`` and the format bench (``formats``) share it without importing
each other; it imports nothing of the bench.
"""

from __future__ import annotations


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())

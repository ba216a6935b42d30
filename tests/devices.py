"""Devices the torch tests run on: the CPU always, CUDA when there is one (``gpu`` marker)."""

import pytest

try:
    import torch

    _cuda = torch.cuda.is_available()
except ImportError:  # torch is an optional extra; the torch tests skip themselves
    _cuda = False

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(not _cuda, reason="no CUDA device")])]

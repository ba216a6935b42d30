"""Shared pytest set-up: Hypothesis profiles (see rheo/checks/profiles.py), and one
torch thread per xdist worker (the workers already fill the cores; more threads per worker
only fight over them)."""

import os

from rheo.checks.cases.profiles import register

register()

if os.environ.get("PYTEST_XDIST_WORKER"):
    try:
        import torch
    except ImportError:  # torch is optional; the torch tests skip themselves
        pass
    else:
        torch.set_num_threads(1)

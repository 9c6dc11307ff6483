"""Notebook 03, DistributedDataParallel: the recipe (and its torchrun script), instruments, scaling and plots.

``from helpers.ddp import …`` gives every public name of them, and the plumbing notebook 03 uses
(``run_throughput``, ``run_torchrun``, ``torchrun_command``, ``loopback_aliases``).
"""
from ..launching.throughput import run_throughput  # noqa: F401
from ..launching.torchrun import loopback_aliases, run_torchrun, torchrun_command  # noqa: F401
from .instruments import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403
from .scaling import *  # noqa: F401,F403

"""Notebook 10, beyond one machine: a training loop that resumes, a worker killed and restarted (torchrun,
Ray Train), preemption, DCP checkpoints that reshard, and the tools that name a hang.

``from helpers.resilience import …`` gives every public name of them, and the plumbing notebook 10 uses
(``run_torchrun``, ``init_ray``, ``shutdown_ray``).
"""
from ..launching.ray_cluster import init_ray, shutdown_ray  # noqa: F401
from ..launching.torchrun import run_torchrun, torchrun_command  # noqa: F401
from .cluster import *  # noqa: F401,F403
from .hangs import *  # noqa: F401,F403
from .instruments import *  # noqa: F401,F403
from .lesson import exercise_setup  # noqa: F401
from .plots import *  # noqa: F401,F403
from .ray_loop import *  # noqa: F401,F403
from .ray_runs import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403
from .workers import *  # noqa: F401,F403

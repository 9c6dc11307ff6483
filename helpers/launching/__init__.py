"""Distributed plumbing, shared by the lessons that start processes (01, 02, 03, 04, 05, 08, 09).

The backend and local-rank rules (``ranks``), the notebook launcher (``launcher``, ``failures``, the
ranks' output: ``relay``), notebook 03's demo workers (``workers``; the failure drills only the tests
run are in tests/launch_drills.py), the distributed timer (``timing``), the DDP throughput instrument
(``throughput``), ``torchrun`` from a notebook (``torchrun``) and Ray on this machine (``ray_cluster``,
its token: ``ray_auth``).
"""
from . import workers  # noqa: F401
from .failures import LaunchError, Stopped  # noqa: F401
from .launcher import describe_launch, launch  # noqa: F401
from .ranks import agree, choose_backend, local_device, local_rank, local_world_size  # noqa: F401
from .timing import seconds_per_call, slowest_seconds_per_call, synchronize  # noqa: F401

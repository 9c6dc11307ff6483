"""Notebook 04, hyperparameter tuning: the recipe (Ray Tune), instruments and plots, and the Ray plumbing.

``from helpers.tuning import …`` gives every public name of them, and ``init_ray``,
``cluster_nodes``, ``shutdown_ray``, ``keep_stop_handlers`` (``helpers.dist.ray_cluster``).
"""
from ..dist.ray_cluster import cluster_nodes, init_ray, keep_stop_handlers, ray_temp_dir, shutdown_ray  # noqa: F401
from .instruments import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403

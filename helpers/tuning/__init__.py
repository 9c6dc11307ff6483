"""Notebook 04, hyperparameter tuning: the recipe (Ray Tune), instruments, experiments and plots, and the Ray plumbing.

``from helpers.tuning import …`` gives every public name of them, and ``init_ray``,
``cluster_nodes``, ``shutdown_ray``, ``keep_stop_handlers`` (``helpers.launching.ray_cluster``).
The plots (and matplotlib) load on first use: every trial's worker imports this package to find
``train_digits``, and needs no plotting library.
"""
from ..launching.ray_cluster import cluster_nodes, init_ray, keep_stop_handlers, ray_temp_dir, shutdown_ray  # noqa: F401
from .experiments import *  # noqa: F401,F403
from .instruments import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403

_PLOTS = ("plot_grid_vs_random", "plot_bayes_steps", "plot_asha")


def __getattr__(name: str):
    if name in _PLOTS:
        from . import plots
        return getattr(plots, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

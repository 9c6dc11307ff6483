"""Notebook 05, monitoring: the recipe (tqdm, SummaryWriter, the profiler), the readers, TensorBoard's server.

``from helpers.monitor import …`` gives every public name of them, and the course's one logger,
``Monitor`` with ``wandb_mode`` (``helpers.core.logger``).
"""
from ..core.logger import Monitor, wandb_logged_in, wandb_mode  # noqa: F401
from .board import *  # noqa: F401,F403
from .instruments import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403

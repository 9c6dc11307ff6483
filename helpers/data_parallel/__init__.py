"""Notebook 02, inside ``nn.DataParallel``: the recipe, its instruments and their plots.

``from helpers.data_parallel import …`` gives every public name of its modules.
"""
from .instruments import *  # noqa: F401,F403
from .memory import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .processes import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403
from .report import *  # noqa: F401,F403
from .speed import *  # noqa: F401,F403

"""Notebook 08, collectives: the recipe (a ring all-reduce and DDP rebuilt by hand), its instruments and plots.

``from helpers.collectives import …`` gives every public name of them.
"""
from .instruments import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .readout import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403
from .ring_exercise import *  # noqa: F401,F403
from .ring_readout import *  # noqa: F401,F403
from .scratch_ddp import *  # noqa: F401,F403

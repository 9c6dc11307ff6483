"""Notebook 09, sharding: the recipe (memory and communication arithmetic, the sharding calls), instruments and plots.

``from helpers.sharding import …`` gives every public name of them.
"""
from .instruments import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403
from .shares import *  # noqa: F401,F403
from .strategies import *  # noqa: F401,F403
from .tables import *  # noqa: F401,F403

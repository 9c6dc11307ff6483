"""Notebook 07, transfer learning and augmentation: the recipe, its instruments and their plots.

``from helpers.transfer import …`` gives every public name of the three modules.
"""
from .instruments import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403

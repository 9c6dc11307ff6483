"""Notebook 01, model parallelism and pipelining: the recipe, its instruments, their plots and tables.

``from helpers.pipeline import …`` gives every public name of its modules.
"""
from .instruments import *  # noqa: F401,F403
from .library import *  # noqa: F401,F403
from .bounds import *  # noqa: F401,F403
from .bound_lines import *  # noqa: F401,F403
from .gaps import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .tables import *  # noqa: F401,F403
from .compare import *  # noqa: F401,F403
from .rounds import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403

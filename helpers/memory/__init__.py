"""Notebook 06, out-of-memory troubleshooting: the recipe, its instruments (the step's peak among them) and their plots.

``from helpers.memory import …`` gives every public name of them, and the saved-tensor tracker
(``helpers.core.saved``).
"""
from ..core.saved import BudgetExceeded, SavedTensorTracker  # noqa: F401
from .instruments import *  # noqa: F401,F403
from .peak import *  # noqa: F401,F403
from .plots import *  # noqa: F401,F403
from .precision import *  # noqa: F401,F403
from .recipe import *  # noqa: F401,F403
from .recorded import *  # noqa: F401,F403

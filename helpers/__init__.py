"""Beyond One GPU: the helpers behind the course notebooks.

Import name ``helpers``; distribution name ``beyond-one-gpu``. The folders show what is shared
and what belongs to one notebook:

- ``core/``: the shared core: devices, data, models, the one training loop, measuring, plots,
  showing code, the self-check registry, the one logger, the language messages are said in
  (``set_language``). It imports no lesson.
- ``launching/``: distributed plumbing: the backend and local-rank rules, the notebook launcher, demo
  workers, torchrun and Ray on this machine.
- one package per notebook (a *lesson*): ``setup`` (00), ``pipeline`` (01), ``data_parallel``
  (02), ``ddp`` (03), ``tuning`` (04), ``monitor`` (05), ``memory`` (06), ``transfer`` (07),
  ``collectives`` (08), ``sharding`` (09), ``resilience`` (10). Each holds its ``lesson`` (exercises and benchmark,
  which ``course`` finds by looking, for ``check`` and ``bench``) and, from 01 on, its ``recipe``
  (the code the lesson teaches, shown in the notebook) and its ``instruments`` (what measures and
  draws it, the drawing mostly in ``plots``). No lesson imports another.
- ``bench``: ``python -m helpers.bench NAME|all``; ``publish``: the course's published address.

The names most notebooks need are importable from ``helpers`` directly.
"""
import os as _os

# Before torch loads OpenMP: let idle OpenMP threads sleep instead of spinning, so that they take no
# CPU that other work needs (00, section 3). Set OMP_WAIT_POLICY yourself (before importing torch)
# to choose otherwise.
# OpenMP reads its environment once, when the runtime starts (torch loads it on import): a variable
# set after that changes nothing. So record whether torch was already imported when this ran (00).
import sys as _sys  # noqa: E402

OMP_SET_BEFORE_TORCH = "torch" not in _sys.modules
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .core.checks import check, find_exercises_with  # noqa: E402  (after the environment default above)
from .course import load_exercises  # noqa: E402
from .core.data import digits_batch, load_datasets, make_loaders, tensors  # noqa: E402
from .core.i18n import get_language, set_language  # noqa: E402
from .core.device import (device_table, get_device, gpu_count, hardware_label, list_devices,  # noqa: E402
                          model_device, physical_cores)
from .core.measure import Timer, max_abs_diff, seed_everything, torch_threads  # noqa: E402
from .core.models import MLP, DigitsCNN, build_model, count_parameters  # noqa: E402
from .core.show import show  # noqa: E402
from .core.train import History, evaluate, train  # noqa: E402

find_exercises_with(load_exercises)  # check() finds a lesson's exercises when asked, one lesson at a time
del find_exercises_with, load_exercises

__version__ = "0.2.0"

__all__ = ["check", "digits_batch", "load_datasets", "make_loaders", "tensors", "device_table", "get_device", "gpu_count",
           "hardware_label", "list_devices", "model_device", "physical_cores", "Timer", "max_abs_diff",
           "seed_everything", "torch_threads", "MLP", "DigitsCNN", "build_model", "count_parameters", "show",
           "History", "evaluate", "train", "get_language", "set_language"]

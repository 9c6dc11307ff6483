"""Beyond One GPU: the helpers behind the course notebooks.

Import name ``helpers``; distribution name ``beyond-one-gpu``. One module per topic:

- ``device``: what hardware is here (00, 06)
- ``data``, ``models``, ``train``, ``plots``, ``utils``: the course's data, models, loop (00+)
- ``checks``: self-checks for the exercises (all notebooks)
"""
from .checks import check
from .data import load_datasets, make_loaders
from .device import device_table, get_device, gpu_count, hardware_label, list_devices
from .models import MLP, DigitsCNN, build_model, count_parameters
from .train import History, evaluate, train
from .utils import Timer, seed_everything

__version__ = "0.1.0"

__all__ = ["check", "load_datasets", "make_loaders", "device_table", "get_device", "gpu_count",
           "hardware_label", "list_devices", "MLP", "DigitsCNN", "build_model", "count_parameters",
           "History", "evaluate", "train", "Timer", "seed_everything"]

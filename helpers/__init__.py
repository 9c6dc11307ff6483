"""Beyond One GPU: the helpers behind the course notebooks.

Import name ``helpers``; distribution name ``beyond-one-gpu``. One module per topic; every public
function's docstring names the notebook it serves:

- ``device``, ``data``, ``models``, ``train``, ``plots``, ``utils``, ``checks``: the course's
  hardware report, offline data, models, training loop, plots and self-checks (00 onwards)
- ``launch``, ``workers``: run a function on N processes from a notebook (01, 03, 05)
- ``pipeline``: model parallelism and pipelining (01)
- ``data_parallel``: inside ``nn.DataParallel`` (02)
- ``ddp``, ``ddp_script``: DistributedDataParallel, and its torchrun script (03)
- ``tuning``: grid, random, Bayesian and Ray Tune (04)
- ``monitor``: tqdm, TensorBoard, W&B, the profiler (05)
- ``memory``: out-of-memory troubleshooting (06)
- ``transfer``: transfer learning and augmentation (07)
- ``bench``: ``python -m helpers.bench NAME|all``, the README's results table
"""
import os as _os

# Before torch loads OpenMP: let idle OpenMP threads sleep instead of spinning. With the default
# (spinning) a kernel whose machine has one core busy elsewhere runs small models 10-50× slower:
# measured on the course's 2-core reference machine, 3 epochs of DigitsCNN in a Jupyter kernel
# took 15 s instead of 0.3 s while another process kept one core busy. Set OMP_WAIT_POLICY
# yourself (before importing torch) to choose otherwise.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .checks import check  # noqa: E402  (after the environment default above)
from .data import load_datasets, make_loaders
from .device import device_table, get_device, gpu_count, hardware_label, list_devices
from .models import MLP, DigitsCNN, build_model, count_parameters
from .train import History, evaluate, train
from .utils import Timer, seed_everything

__version__ = "0.1.0"

__all__ = ["check", "load_datasets", "make_loaders", "device_table", "get_device", "gpu_count",
           "hardware_label", "list_devices", "MLP", "DigitsCNN", "build_model", "count_parameters",
           "History", "evaluate", "train", "Timer", "seed_everything"]

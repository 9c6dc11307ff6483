"""Notebook 00 (setup): its exercises. The code it teaches is the course's core: device, data, models, train."""
from __future__ import annotations

import os

from ..core.checks import Exercise

NOTEBOOK = "00_setup"


def _params_hidden128() -> int:
    from ..core.models import DigitsCNN, count_parameters

    return count_parameters(DigitsCNN(hidden=128))["total"]


def _gpus() -> int:
    from ..core.device import gpu_count

    return gpu_count()


EXERCISES = [
    Exercise("00.cores", "int", compute=lambda: os.cpu_count(),
             hint="Python's os module can tell you; so can the device table's CPU row.",
             why="Every timing the course prints says how many cores produced it."),
    Exercise("00.gpus", "int", compute=_gpus, hint="Count the rows of kind GPU in the device table.",
             why="With none, every notebook takes its CPU path and says what a GPU would show."),
    Exercise("00.train_size", "int", digest="7adbbc22fb3a344b9d3e9fd7bc036a700700fbf1c54b01793fb2a766fcf5bade",
             hint="len() of the dataset that load_datasets() returned for the training split.",
             why="The split is fixed by the seed, so everyone's notebook shows the same data."),
    Exercise("00.params_hidden128", "int", compute=_params_hidden128,
             hint="A convolution has in·out·k·k weights plus out biases; a Linear has in·out plus out. Which "
                  "layers change when the hidden width does?",
             why="Only the two layers around the hidden width grow: parameter counts follow from the shapes."),
]

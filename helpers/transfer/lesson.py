"""Notebook 07 (transfer learning and augmentation): its exercises."""
from __future__ import annotations

from ..core.checks import Exercise

NOTEBOOK = "07_transfer_learning"


EXERCISES = [
    Exercise("07.head_params", "int", digest="9fc041e28b31b4a5679f10da8c7a21fc6bfd62406734fef4a8445781c8d6f54e",
             hint="A Linear layer has in_features × out_features weights and out_features biases.",
             why="The whole head is tiny next to the backbone: training only it is cheap."),
    Exercise("07.frozen_params", "int", digest="4b96f086adead3934bd53b359eaba59c0278165ce045d8b11f19ec07511acc4b",
             hint="Only the new head trains: count its two Linear layers' weights and biases.",
             why="count_parameters(model)['trainable'] says the same."),
    Exercise("07.frozen_tensors", "int", digest="84b2a4270650e23a69ab6d6d7ccf1c351a3c4b1eb83b0f8c15b4e4246fadc349",
             hint="Which layers are frozen, and which tensors does each of them have?",
             why="frozen_state() returns exactly these tensors, compared before and after training."),
]

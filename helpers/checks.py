"""Self-checks for the exercises: ``check("00.cores", answer)`` says correct, or gives a hint.

Used by every notebook. The expected answer is never printed; a wrong or missing answer gets a
hint that points at where to look. Some answers depend on the reader's machine and are computed
on it (for example, the number of CPU cores).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable

import torch

@dataclass
class Exercise:
    """One self-check: how to compute the expected answer, how close is close enough, and a hint."""

    expected: Callable[[], Any]
    hint: str
    rel_tol: float = 0.0
    abs_tol: float = 0.0


def _bubble(p: int, m: int) -> float:
    return (p - 1) / (m + p - 1)


EXERCISES: dict[str, Exercise] = {
    # 00_setup
    "00.cores": Exercise(lambda: os.cpu_count(), "Look at the device table, or at os.cpu_count()."),
    "00.gpus": Exercise(lambda: torch.cuda.device_count() if torch.cuda.is_available() else 0,
                        "How many 'GPU' rows does the device table have?"),
    "00.train_size": Exercise(lambda: 1257, "len() of the training dataset that load_datasets() returned."),
    "00.params_hidden128": Exercise(
        lambda: sum(p.numel() for p in __import__("helpers.models", fromlist=["DigitsCNN"]).DigitsCNN(hidden=128).parameters()),
        "Build DigitsCNN(hidden=128) and count with count_parameters(); or by hand: "
        "conv1 1·16·9+16, conv2 16·32·9+32, linear 512·h+h, head h·10+10."),
    # 02_data_parallel
    "02.chunks_10_on_4": Exercise(lambda: [3, 3, 3, 1], "scatter uses torch.chunk: ceil(10 / 4) rows per chunk, "
                                  "the last one gets what is left.", ),
    "02.gathered_bytes": Exercise(lambda: 1024 * 50_000 * 4, "Gathered logits: batch × classes × 4 bytes (float32)."),
    # 03_ddp
    "03.rank3_n10_k4": Exercise(lambda: 3, "DistributedSampler pads the dataset to a multiple of the number of ranks, "
                                "then deals the indices out like cards."),
    "03.padding_n10_k4": Exercise(lambda: 2, "Round 10 up to the next multiple of 4; how many indices are repeated?"),
    "03.allreduce_8": Exercise(lambda: 36, "Each rank contributes rank + 1; all_reduce adds them all: 1 + 2 + … + 8."),
    # 04_hyperparameter_tuning
    "04.rungs_rf2": Exercise(lambda: [1, 2, 4, 8, 16], "Rungs are grace_period · rf^k up to max_t, then max_t: "
                             "1, then ×2 each time."),
    "04.grid_distinct": Exercise(lambda: 4, "A 4×4 grid has 16 points: how many different values of the first parameter?"),
    "04.full_epochs": Exercise(lambda: 192, "Every one of the 12 trials runs to max_t = 16."),
    # 05_monitoring
    "05.scalar_points": Exercise(lambda: 3, "One add_scalar call per epoch, for how many epochs?"),
    "05.add_scalars_runs": Exercise(lambda: 2, "add_scalars writes one sub-run per key of its dictionary."),
    "05.profiler_steps": Exercise(lambda: 4, "schedule(wait, warmup, active): only the active steps are recorded."),
    # 06_oom_troubleshooting
    "06.leak_batch128": Exercise(
        lambda: __import__("helpers.memory", fromlist=["leak_curve"]).leak_curve(False, iterations=3, batch=128)["bytes_per_iter"],
        "Which tensors does each iteration save? The input, both ReLU outputs, the log-softmax, the targets "
        "(and one scalar): most of them grow with the batch."),
    "06.checkpoint_n64": Exercise(lambda: 16, "With s = √n segments you keep s segment inputs plus the last segment's "
                                  "n/s block outputs."),
    "06.fp16_bytes": Exercise(lambda: 2_000_000, "A float16 number takes 2 bytes."),
    # 07_transfer_learning
    "07.head_params": Exercise(lambda: 64 * 5 + 5, "A new nn.Linear(64, 5): weights plus biases."),
    "07.frozen_params": Exercise(lambda: 512 * 64 + 64 + 64 * 5 + 5, "Linear(512, 64) and Linear(64, 5), weights and "
                                 "biases: the convolutions are frozen."),
    "07.frozen_tensors": Exercise(lambda: 4, "Which tensors do the two frozen convolutions have? Each has a weight "
                                  "and a bias."),
    # 01_model_parallel
    "01.bubble_p4_m6": Exercise(lambda: _bubble(4, 6), "The bubble fraction is (p − 1) / (m + p − 1).", abs_tol=1e-3),
    "01.ideal_p2_m8": Exercise(lambda: 2 * 8 / (8 + 2 - 1), "Ideal speedup over the naive split: p·m / (m + p − 1).",
                               abs_tol=1e-2),
    "01.peak_1f1b_p4": Exercise(lambda: 4, "Under 1F1B, the first stage starts backwards as soon as the pipeline is "
                                "full: how many micro-batches are in flight then?"),
}


def verify(exercise: str, answer: Any) -> tuple[bool, str]:
    """Whether ``answer`` to ``exercise`` is right, and the message a student sees (never the answer)."""
    if exercise not in EXERCISES:
        raise KeyError(f"no exercise called {exercise!r}; the ids look like '00.cores' "
                       f"(known: {', '.join(sorted(EXERCISES))})")
    ex = EXERCISES[exercise]
    if answer is None or answer is ... or (isinstance(answer, str) and not answer.strip()):
        return False, f"⏳ {exercise}: not answered yet — replace None with your answer. Hint: {ex.hint}"
    if _matches(answer, ex.expected(), ex):
        return True, f"✅ {exercise}: correct!"
    return False, f"❌ {exercise}: not quite. Hint: {ex.hint}"


def check(exercise: str, answer: Any) -> None:
    """Check a student's ``answer`` to ``exercise``: prints ✅, or a hint (all notebooks)."""
    print(verify(exercise, answer)[1])


def _matches(answer: Any, expected: Any, ex: Exercise) -> bool:
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        try:
            a = float(answer)
        except (TypeError, ValueError):
            return False
        return math.isclose(a, float(expected), rel_tol=ex.rel_tol, abs_tol=ex.abs_tol)
    if isinstance(expected, str):
        return str(answer).strip().lower() == expected.strip().lower()
    return answer == expected

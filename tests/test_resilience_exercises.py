"""Notebook 10's exercises: the resume check passes a run that restores everything and refuses each plausible
miss (the optimizer, the schedule, the random state, the epoch, a run that starts over); the lost-time answer."""
import os

import pytest
import torch
from torch import nn

from helpers.core.checks import verify
from helpers.resilience import exercise_setup


def _train(save=("model", "optimizer", "scheduler", "rng"), next_epoch=1, resume=True):
    """A train(epochs, path, on_epoch) that saves the parts named, the epoch + next_epoch, and resumes if told."""
    def train(epochs, path, on_epoch):
        model, optimizer, scheduler, loader = exercise_setup()
        parts = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
        start = 0
        if resume and os.path.exists(path):
            state = torch.load(path, weights_only=False)
            for name, obj in parts.items():
                if name in state:
                    obj.load_state_dict(state[name])
            if "rng" in state:
                torch.set_rng_state(state["rng"])
            start = state["epoch"]
        for epoch in range(start, epochs):
            on_epoch(epoch)
            for x, y in loader:
                optimizer.zero_grad()
                nn.functional.cross_entropy(model(x), y).backward()
                optimizer.step()
            scheduler.step()
            state = {name: obj.state_dict() for name, obj in parts.items() if name in save}
            if "rng" in save:
                state["rng"] = torch.get_rng_state()
            torch.save({**state, "epoch": epoch + next_epoch}, path)
        return model
    return train


def test_a_run_that_restores_everything_passes():
    ok, message = verify("10.resume", _train())
    assert ok, message


@pytest.mark.parametrize("missing", ["optimizer", "scheduler", "rng", "model"])
def test_a_run_that_leaves_one_state_out_is_refused(missing):
    ok, message = verify("10.resume", _train(save=tuple(p for p in ("model", "optimizer", "scheduler", "rng")
                                                         if p != missing)))
    assert not ok and "parameters differ" in message, message


def test_the_epoch_just_finished_instead_of_the_next_is_refused():
    ok, message = verify("10.resume", _train(next_epoch=0))
    assert not ok and "only the epochs still to do" in message, message


def test_a_run_that_starts_over_is_refused():
    ok, message = verify("10.resume", _train(resume=False))
    assert not ok and "only the epochs still to do" in message, message


def _scaffold(tmp_path, source):
    """The notebook's scaffold (lesson.RESUME_SKELETON, edited by ``source``) defined in a module file, as a notebook
    cell's function is: its source readable."""
    import importlib.util

    from helpers.resilience import lesson

    path = tmp_path / "scaffold.py"
    path.write_text("from helpers.resilience import exercise_setup\nimport torch\n" + source(lesson.RESUME_SKELETON))
    spec = importlib.util.spec_from_file_location("scaffold", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.train


def test_the_untouched_skeleton_is_not_answered_yet(tmp_path):
    ok, message = verify("10.resume", _scaffold(tmp_path, lambda s: s))   # the notebook's scaffold, as given
    assert not ok and message.startswith("⏳ 10.resume: not answered yet"), message


def test_the_scaffold_with_one_place_filled_is_judged_not_taken_for_untouched(tmp_path):
    save = "        ...   # your code: save what a resumed run needs"
    filled = lambda s: s.replace(save, '        torch.save({"model": model.state_dict(), "epoch": epoch + 1}, path)')
    ok, message = verify("10.resume", _scaffold(tmp_path, filled))
    assert not ok and message.startswith("❌") and "only the epochs still to do" in message, message


@pytest.mark.parametrize("answer, right", [(19, True), (15, False), (34, False), (4, False), (30, False)])
def test_the_time_lost_per_failure(answer, right):
    assert verify("10.lost_minutes", answer)[0] is right

"""A tuning run that fails (helpers.tuning, no running Ray): the Stop button is given back (Ray's signal handlers are
restored), and a failed search says the trainable's error first and what to do."""
import signal
import threading
import time

import pytest

from helpers import tuning as T


# --- issue 21: the Stop button after tuning, and a failed search said in one line -----------------------

class _FitLeavesItsHandlers:
    """A Tuner whose fit() does what Ray Tune's does to the signal handlers (install, never restore), then fails."""

    def __init__(self, *args, **kwargs):
        pass

    def fit(self):
        signal.signal(signal.SIGINT, lambda *a: None)
        signal.signal(signal.SIGUSR1, lambda *a: None)
        raise RuntimeError("fit failed")


def _stop_interrupts() -> bool:
    try:
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        for _ in range(20):
            time.sleep(0.05)
    except KeyboardInterrupt:
        return True
    return False


def test_a_tuning_run_that_raises_still_gives_the_stop_button_back(monkeypatch, default_sigint):
    from helpers.tuning import experiments as E

    usr1 = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(E, "build_tuner", lambda *a, **k: _FitLeavesItsHandlers())
    try:
        with pytest.raises(RuntimeError, match="fit failed"):
            T.run_tuner("x", num_samples=1, max_t=1)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGUSR1) == usr1
        assert _stop_interrupts(), "SIGINT no longer raises KeyboardInterrupt after run_tuner"
    finally:
        signal.signal(signal.SIGUSR1, usr1)


def test_old_api_errors_gives_the_stop_button_back(monkeypatch, default_sigint, tmp_path):
    from ray import tune

    class Tuner(_FitLeavesItsHandlers):
        def fit(self):
            try:
                super().fit()
            except RuntimeError:
                return [type("R", (), {"error": ValueError("old form"), "config": {"form": form}})()
                        for form in T.instruments._OLD_FORMS]

    usr1 = signal.getsignal(signal.SIGUSR1)
    monkeypatch.setattr(tune, "Tuner", Tuner)
    try:
        out = T.old_api_errors(tmp_path)
        assert "old form" in out["tune.report(accuracy=...) in a trainable"]
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert signal.getsignal(signal.SIGUSR1) == usr1
    finally:
        signal.signal(signal.SIGUSR1, usr1)


class _Failed:
    def __init__(self, error):
        self.error, self.config, self.metrics_dataframe, self.path = error, {"lr": -1.0, "max_epochs": 1}, None, "/x/t0"


class _Grid(list):
    num_terminated = 0

    @property
    def num_errors(self):
        return len(self)


def _ray_error(cause: Exception) -> Exception:
    """What a ResultGrid holds for a trial whose trainable raised ``cause``: Ray's RayTaskError, ANSI header first."""
    from ray.exceptions import RayTaskError

    trace = "Traceback (most recent call last):\n" + "\n".join(f'  File "ray/x.py", line {i}, in f' for i in range(60))
    return RayTaskError("ImplicitFunc.train", trace + f"\n{type(cause).__name__}: {cause}", cause).as_instanceof_cause()


def test_every_trial_failing_says_the_trainables_error_first_and_what_to_do():
    err = _ray_error(ValueError("Invalid learning rate: -1.0"))
    assert str(err).startswith("\x1b[36m")           # what Ray's own message starts with
    with pytest.raises(T.TrialsFailed) as info:
        T.summarize(_Grid([_Failed(err), _Failed(err)]), seconds=1.0)
    lines = str(info.value).splitlines()
    assert lines[0] == "ValueError: Invalid learning rate: -1.0"
    assert "2 of 2 trials" in lines[1] and "search space" in lines[1] and "max_epochs" not in lines[1]
    assert len(lines) <= 4 and "\x1b[" not in str(info.value)
    assert info.value.__cause__ is err
    assert info.value._render_traceback_() == [f"TrialsFailed: {info.value}"]


def test_some_trials_failing_is_said_in_one_line(capsys):
    import pandas as pd

    ok = type("R", (), {"error": None, "config": {"lr": 0.01, "hidden": 16, "batch_size": 64},
                        "metrics_dataframe": pd.DataFrame({T.METRIC: [0.5, 0.6]})})()
    grid = _Grid([ok, _Failed(_ray_error(KeyError("batch_size")))])
    grid.num_terminated = 1
    out = T.summarize(grid, seconds=1.0)
    assert out["errors"] == 1 and out["trials"] == 1
    printed = capsys.readouterr().out
    assert printed.strip() == "1 of 2 trials failed, the first with KeyError: 'batch_size'; the summary covers the trials that reported."

"""The course under misuse and faults: one drill per class of fault (issue: nothing lost, nothing hangs, nothing phones
home). Each test failed on the code before the fix it checks.

Lost files · hangs · interrupted runs · dead ranks · leftover processes · the wrong process killed · shared
temporary folders. Network use when offline: test_faults_offline.py; self-checks and silent nonsense:
test_faults_nonsense.py."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import launch_drills
from conftest import is_rank, launched_children, read_lines
from helpers import MLP, make_loaders
from helpers.launching import launcher as L
from helpers.launching import workers
from helpers import monitor as MO
from helpers import tuning as T
from helpers.launching import ray_cluster as RC
from helpers.core.data import load_digits_arrays


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _wait_gone(pids, seconds: float = 10) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.2)
    return [p for p in pids if _alive(p)]


# --- lost files -------------------------------------------------------------------------------------

def test_monitor_never_deletes_what_it_did_not_write(tmp_path, monkeypatch):
    (tmp_path / "my_notebook.ipynb").write_text("{}")
    monkeypatch.chdir(tmp_path)
    for target in (".", tmp_path):
        with pytest.raises(FileExistsError, match="Nothing was deleted.*runs/my_run"):
            MO.Monitor(target, wandb=False)
        with pytest.raises(FileExistsError, match="Nothing was deleted"):
            MO.write_all_summaries(target, MLP(), make_loaders(256), epochs=1)
    assert (tmp_path / "my_notebook.ipynb").read_text() == "{}"


def test_a_rerun_replaces_only_the_files_it_wrote(tmp_path):
    run = tmp_path / "runs" / "r"
    for i in range(2):
        with MO.Monitor(run, wandb=False) as mon:
            mon.log({"a": float(i)}, 1)
        if i == 0:
            (run / "my_notes.txt").write_text("mine")          # the reader adds a file of their own
    assert (run / "my_notes.txt").read_text() == "mine"
    assert [v for _, v in MO.read_back(run)["runs"]["tensorboard"]["scalars"]["a"]] == [1.0]


def test_paths_with_a_tilde_are_the_readers_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with MO.Monitor("~/runs/x", wandb=False) as mon:
        mon.log({"a": 1.0}, 1)
    assert (tmp_path / "runs" / "x" / "tensorboard").is_dir() and not Path("~").exists()
    monkeypatch.setenv("BEYOND_ONE_GPU_DATA", "~/data")
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "data" / "digits.npz")):
        load_digits_arrays()


# --- hangs --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [({"num_samples": -1}, "sample forever"), ({"num_samples": 0}, "positive int"),
                                           ({"max_t": 0}, "max_t must"), ({"grace_period": 5, "max_t": 3}, "grace_period"),
                                           ({"reduction_factor": 1}, "at least 2")])
def test_tuning_budgets_ray_would_misread_are_refused_before_ray_starts(kwargs, match):
    with pytest.raises(ValueError, match=match):
        T.run_tuner("x", **kwargs)


# --- interrupted runs -----------------------------------------------------------------------------------

class _Result:
    def __init__(self, curve, error=None):
        import pandas as pd

        self.error = error
        self.config = {"lr": 0.01, "hidden": 32, "batch_size": 64}
        self.metrics_dataframe = None if curve is None else pd.DataFrame({T.METRIC: curve})


class _Grid(list):
    """A ResultGrid as Ray returns it after Stop: ``finished`` trials terminated, the others not."""

    def __init__(self, results, finished: int) -> None:
        super().__init__(results)
        self.num_terminated, self.num_errors = finished, 0


def test_a_stopped_experiment_is_summarised_from_the_trials_that_reported():
    grid = _Grid([_Result([0.5, 0.7]), _Result(None), _Result([0.4])], finished=1)   # Stop: two unfinished
    out = T.summarize(grid, seconds=6.0)
    assert out["interrupted"] and out["trials"] == 2 and out["trials_without_result"] == 1
    assert out["best_accuracy"] == 0.7 and out["epochs"] == 3
    with pytest.raises(RuntimeError, match="stopped before any epoch ended"):
        T.summarize(_Grid([_Result(None)], finished=0), seconds=1.0)


# --- dead ranks ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("how, words", [("SIGKILL", "killed by SIGKILL (the out-of-memory killer"),
                                        ("SIGSEGV", "killed by SIGSEGV (a crash in native code"),
                                        ("exit0", "exited with code 0 without returning a result")])
def test_the_rank_that_died_first_is_named_with_how(how, words):
    t0 = time.monotonic()
    with pytest.raises(L.LaunchError) as e:
        L.launch(launch_drills.die_on_rank, 2, args=(1, how), verbose=False, timeout=60)
    assert time.monotonic() - t0 < 20                       # not the full timeout
    assert e.value.rank == 1 and words in str(e.value)
    assert "rank 0 then failed" in str(e.value)             # the consequence, shown second
    assert not launched_children()


def test_a_script_without_a_main_guard_is_told_the_fix(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("from helpers.launching import launch\nfrom helpers.launching import workers\n"
                      "launch(workers.whoami, 2, verbose=False, timeout=60)\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert r.returncode != 0
    assert "LaunchError" in r.stderr and 'if __name__ == "__main__":' in r.stderr.splitlines()[-1] + r.stderr


# --- leftover processes ----------------------------------------------------------------------------------

def test_processes_a_rank_starts_end_with_the_launch():
    pids = L.launch(launch_drills.start_child_and_return, 2, verbose=False, timeout=60)
    assert _wait_gone(pids, 5) == []


_LAUNCH_AND_HANG = f"""
import sys
sys.path.insert(0, {launch_drills.TESTS!r})
import launch_drills
from helpers.launching import launch
if __name__ == "__main__":
    import faulthandler
    faulthandler.dump_traceback_later(30)   # if the drill itself gets stuck, say where
    launch(launch_drills.print_pid_and_hang, 2, verbose=False, timeout=600)
"""


def test_ranks_end_when_the_kernel_that_launched_them_is_killed(tmp_path):
    script = tmp_path / "kernel.py"
    script.write_text(_LAUNCH_AND_HANG)
    err = open(tmp_path / "stderr.txt", "w")
    proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                            text=True, cwd=tmp_path)
    try:
        pids = [int(line.split()[-1]) for line in read_lines(proc.stdout, 2, 40, " pid ")]
        if len(pids) < 2:  # say what happened: the launcher's stack (faulthandler), its children, any rank
            time.sleep(35)
            status = open(f"/proc/{proc.pid}/status").read()
            print([line for line in status.splitlines() if line.startswith("Sig")], file=err)
            for c in psutil.process_iter(["pid", "ppid", "status", "cmdline"]):
                if c.info["ppid"] == proc.pid or is_rank(c):
                    print(c.info, file=err, flush=True)
    finally:
        proc.kill()                                   # as the OOM killer, or a crashed kernel
        proc.wait()
        err.close()
    assert len(pids) == 2, (tmp_path / "stderr.txt").read_text()[-3000:]
    assert _wait_gone(pids, 10) == []


def test_the_watchdog_cleans_up_after_a_dead_parent_without_importing_torch_first(tmp_path, monkeypatch):
    """helpers/core/watchdog.py, started by path: it finds helpers with no PYTHONPATH, waits on psutil alone (torch
    only once the parent is gone), then kills the groups and the marked processes, and exits."""
    from helpers.core.procs import watch_parent

    monkeypatch.delenv("PYTHONPATH", raising=False)
    marker = str(tmp_path / "watched")   # named by the marked process alone, not by this one's files in tmp_path
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", marker])
    group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    dog = watch_parent(marker=marker, groups=[group.pid], parent=parent.pid)
    try:
        time.sleep(1.5)
        assert dog.poll() is None and psutil.Process(dog.pid).memory_info().rss < 100 * 2**20   # no torch yet
        parent.kill()
        assert dog.wait(60) == 0 and marked.wait(10) == -9 and group.wait(10) == -9
    finally:
        for p in (parent, marked, group, dog):
            p.kill()
            p.wait()


# --- the wrong process killed -------------------------------------------------------------------------------

def test_a_stale_tensorboard_entry_never_kills_the_process_that_reused_its_pid(tmp_path):
    from tensorboard import manager, version

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    info = manager.TensorBoardInfo(version=version.VERSION, start_time=int(time.time()) - 3600, pid=other.pid, port=6006,
                                   path_prefix="", logdir=str(tmp_path), db="", cache_key="x")
    entry = Path(manager._get_info_dir(), f"pid-{other.pid}.info")
    entry.write_text(manager._info_to_string(info) + "\n")
    try:
        assert MO.stop_tensorboards(tmp_path) == 0
        assert other.poll() is None and not entry.exists()      # alive, and the stale entry is gone
    finally:
        other.kill()
        other.wait()
        entry.unlink(missing_ok=True)


# --- shared temporary folders -------------------------------------------------------------------------------

def test_ray_uses_a_private_folder_even_if_someone_made_the_usual_one_open_to_all(tmp_path, monkeypatch):
    from helpers.core import files as F

    monkeypatch.delenv("BEYOND_ONE_GPU_RAY_DIR")   # the suite's own folder (conftest): not what a reader gets
    monkeypatch.setattr(F.tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(F, "_PRIVATE", {})
    usual = tmp_path / f"bog-ray-{os.getuid()}"
    usual.mkdir()
    usual.chmod(0o777)
    got = RC.ray_temp_dir()
    assert got != usual and got.stat().st_mode & 0o777 == 0o700 and got.stat().st_uid == os.getuid()
    monkeypatch.setattr(F, "_PRIVATE", {})
    usual.chmod(0o700)
    assert RC.ray_temp_dir() == usual

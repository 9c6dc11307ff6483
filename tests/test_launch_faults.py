"""The launcher under Stop, dying ranks and misuse (issue: green on a busy machine, nothing lost, no hang).

Every drill acts on events the ranks report (a file they write, a message they print), never on a
guess of how long starting them takes, and installs Python's SIGINT handler itself: started as a
background job (``nohup pytest &``), a process inherits SIGINT ignored, and Stop would do nothing.
"""
from __future__ import annotations

import glob
import signal
import threading
import time
from pathlib import Path

import pytest

import launch_drills
from conftest import is_rank, launched_children
from helpers.launching import launcher as L
from helpers.launching import relay, workers


def _wait_for(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds:g} s for {what}")
        time.sleep(0.05)


@pytest.fixture
def stop_button(default_sigint):
    """``press()`` does what Jupyter's Stop does to the notebook's process: SIGINT to its main thread."""
    main = threading.main_thread().ident
    return lambda: signal.pthread_kill(main, signal.SIGINT)


def _press_when(press, *conditions) -> threading.Thread:
    """Press Stop once for each condition, as soon as it holds (at most 60 s each)."""
    def run():
        for condition in conditions:
            deadline = time.monotonic() + 60
            while not condition() and time.monotonic() < deadline:
                time.sleep(0.05)
            press()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_stop_pressed_twice_still_ends_every_rank(tmp_path, stop_button):
    """The first Stop once both ranks are in the worker; the second while the cleanup waits for ranks that
    ignore SIGTERM (they have reported the SIGTERM)."""
    ready = lambda: len(glob.glob(str(tmp_path / "ready.*"))) == 2         # noqa: E731
    termed = lambda: len(glob.glob(str(tmp_path / "sigterm.*"))) == 2      # noqa: E731
    presser = _press_when(stop_button, ready, termed)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        L.launch(launch_drills.ignore_sigterm_and_hang, 2, args=(str(tmp_path),), verbose=False, timeout=60)
    presser.join(5)
    assert ready() and termed(), "the drill did not press Stop where it meant to"
    assert time.monotonic() - t0 < 45                       # the cleanup did not wait for the timeout
    assert not launched_children()


def test_stop_says_the_ranks_were_ended_in_one_line(tmp_path, stop_button):
    presser = _press_when(stop_button, lambda: len(glob.glob(str(tmp_path / "ready.*"))) == 2)
    with pytest.raises(KeyboardInterrupt, match=r"^the 2 rank\(s\) of this launch were ended; nothing is left "
                                                r"running\.$") as e:
        L.launch(launch_drills.ignore_sigterm_and_hang, 2, args=(str(tmp_path),), verbose=False, timeout=60)
    presser.join(5)
    assert isinstance(e.value, L.Stopped) and e.value._render_traceback_() == [f"Stopped: {e.value}"]
    assert e.value.__cause__ is None and e.value.__suppress_context__   # no chained multiprocessing traceback
    assert not launched_children()


def test_an_interrupted_launch_leaves_no_semaphore_behind(tmp_path, stop_button):
    before = set(glob.glob("/dev/shm/sem.*"))
    presser = _press_when(stop_button, lambda: len(glob.glob(str(tmp_path / "ready.*"))) == 2)
    with pytest.raises(KeyboardInterrupt) as e:
        L.launch(launch_drills.ignore_sigterm_and_hang, 2, args=(str(tmp_path),), verbose=False, timeout=60)
    presser.join(5)
    assert e.value is not None                               # the traceback is kept, as Jupyter keeps it
    assert set(glob.glob("/dev/shm/sem.*")) - before == set()


def test_a_rank_killed_while_sending_its_result_ends_the_launch():
    """The parent used to wait forever on the half-written message, past any timeout."""
    result: dict = {}

    def run():
        try:
            L.launch(launch_drills.die_while_sending_result, 2, verbose=False, timeout=20)
        except BaseException as e:  # noqa: BLE001  (the thread reports whatever ended the launch)
            result["error"] = e

    t0 = time.monotonic()
    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(60)
    assert not t.is_alive(), "launch() still blocked 60 s after a rank died mid-message (timeout was 20 s)"
    assert time.monotonic() - t0 < 30
    error = result.get("error")
    assert isinstance(error, L.LaunchError) and error.rank == 1 and "SIGKILL" in str(error)
    assert not launched_children()


@pytest.mark.parametrize("fn, args, match", [
    (launch_drills.one_argument, (), r"one_argument cannot be called as one_argument\(rank, world_size, \*args\)"),
    (workers.fail_on_rank, 1, r"args must be a tuple.*args=\(1,\)"),
    (workers.fail_on_rank, (1, 2, 3), r"fail_on_rank cannot be called"),
])
def test_arguments_the_function_cannot_take_are_refused_before_any_process_starts(fn, args, match):
    t0 = time.monotonic()
    with pytest.raises(TypeError, match=match):
        L.launch(fn, 2, args=args, verbose=False, timeout=60)
    assert time.monotonic() - t0 < 1 and not launched_children()


def test_native_writes_and_child_processes_of_a_rank_are_relayed(capsys):
    assert L.launch(launch_drills.write_natively, 2, verbose=False, timeout=60) == [0, 1]
    out, err = capsys.readouterr()
    for rank in (0, 1):
        assert f"native stdout of rank {rank}" in out and f"child of rank {rank}" in out
        assert f"native stderr of rank {rank}" in err


def test_rank_zero_bar_is_shown_live_and_keeps_its_final_state(monkeypatch, capsys):
    shown: list[tuple[str, str]] = []

    class Handle:
        def update(self, data, raw):  # noqa: ANN001
            shown.append(("update", data["text/plain"]))

    def display(data, raw, display_id):  # noqa: ANN001
        shown.append(("display", data["text/plain"]))
        return Handle()

    import IPython.display
    monkeypatch.setattr(relay, "_jupyter", lambda: True)
    monkeypatch.setattr(IPython.display, "display", display)
    assert L.launch(launch_drills.bar_and_return, 2, verbose=False, timeout=60) == [0, 1]
    assert shown[0][0] == "display" and "rank 0 bar" in shown[0][1]
    assert len(shown) >= 3, shown                            # updated while the rank ran, not only at the end
    assert "100%" in shown[-1][1] and "40/40" in shown[-1][1]
    assert "rank 0 bar" not in capsys.readouterr().err       # not printed a second time


def test_outside_jupyter_a_redrawn_line_is_printed_once_in_its_last_state(capsys):
    for chunk in ("\rbar 0%", "\rbar 50%", "\rbar 100%", "\n", "plain line\n", "no newline yet"):
        relay.show(0, "stdout", chunk)
    assert capsys.readouterr().out == "bar 100%\nplain line\n"
    relay.flush()
    assert capsys.readouterr().out == "no newline yet\n"


def test_the_drill_workers_report_on_files(tmp_path):
    """The Stop drills rely on these reports; if a worker stopped writing them, the drills would time out."""
    import multiprocessing as mp
    import os

    p = mp.get_context("spawn").Process(target=launch_drills.ignore_sigterm_and_hang, args=(0, 1, str(tmp_path)))
    p.start()
    try:
        _wait_for(lambda: (tmp_path / "ready.0").exists(), 60, "ready.0")
        os.kill(p.pid, signal.SIGTERM)
        _wait_for(lambda: (tmp_path / "sigterm.0").exists(), 10, "sigterm.0")
        assert p.is_alive()
    finally:
        p.kill()
        p.join()
    assert sorted(x.name for x in Path(tmp_path).iterdir()) == ["ready.0", "sigterm.0"]


def test_stop_in_jupyter_shows_one_short_message_and_leaves_no_rank(tmp_path):
    """Jupyter's Stop (an interrupt of the kernel) during a launch: a few lines, not ~45 of multiprocessing."""
    import re

    import psutil
    from nbval.kernel import CURRENT_ENV_KERNEL_NAME, start_new_kernel

    from conftest import NOTEBOOKS

    km, kc = start_new_kernel(kernel_name=CURRENT_ENV_KERNEL_NAME, cwd=str(NOTEBOOKS))
    try:
        kernel = psutil.Process(km.provisioner.process.pid)
        code = (f"import sys; sys.path.insert(0, {launch_drills.TESTS!r}); import launch_drills\n"
                "from helpers.launching import launch\n"
                f"launch(launch_drills.ignore_sigterm_and_hang, 2, args=({str(tmp_path)!r},), verbose=False, timeout=60)")
        msg_id = kc.execute(code)
        _wait_for(lambda: len(list(tmp_path.glob("ready.*"))) == 2, 60, "both ranks in the worker")
        km.interrupt_kernel()
        reply = kc.get_shell_msg(timeout=60)
        assert reply["parent_header"]["msg_id"] == msg_id and reply["content"]["status"] == "error"
        traceback = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(reply["content"]["traceback"]))
        assert traceback == "Stopped: the 2 rank(s) of this launch were ended; nothing is left running.", \
            traceback
        _wait_for(lambda: not [c for c in kernel.children(recursive=True) if is_rank(c)], 10, "no rank left")
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


_IGNORES_SIGTERM = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, lambda *a: print("sigterm", flush=True))   # says it, and runs on
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])   # in its process group
print("ready", flush=True)
time.sleep(300)
"""


def _gone(p) -> bool:
    import psutil

    try:
        return not p.is_running() or p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("stop", [False, True], ids=["grace runs out", "Stop pressed during the grace"])
def test_end_processes_kills_what_ignores_sigterm_and_its_group(stop_button, stop):
    """The one routine that ends processes (the launcher's ranks, Ray's agents, TensorBoard): SIGTERM, the grace,
    then SIGKILL to what is left and to its process group; a second Stop skips the wait, not the killing."""
    import subprocess
    import sys
    from contextlib import nullcontext

    import psutil

    from helpers.core.procs import end_processes

    proc = subprocess.Popen([sys.executable, "-c", _IGNORES_SIGTERM], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        group = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children()]
        assert len(group) == 2
        heard = threading.Event()
        threading.Thread(target=lambda: proc.stdout.readline() == "sigterm\n" and heard.set(), daemon=True).start()
        presser = _press_when(stop_button, heard.is_set) if stop else None
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt) if stop else nullcontext():
            assert end_processes(group[:1], grace=30 if stop else 1, groups=[proc.pid]) == [proc.pid]
        took = time.monotonic() - t0
        if presser is not None:
            presser.join(5)
        assert heard.is_set() and (took < 20 if stop else took >= 1)      # SIGTERM first; Stop skipped the wait
        _wait_for(lambda: all(map(_gone, group)), 10, "the process and its child gone")
    finally:
        proc.kill()
        proc.wait()

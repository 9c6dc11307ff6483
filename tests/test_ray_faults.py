"""Ray under faults (issue 21: green on a busy machine, nothing lost, no hang): the Stop button after
tuning, a bad search space, and Ray's own processes when offline. Each test failed before its fix.

Every Ray session started here is shut down, and no process of it is left (checked with psutil).
"""
from __future__ import annotations

import ipaddress
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from conftest import read_lines
from helpers import tuning as T
from helpers.core.procs import session_processes
from helpers.launching import ray_cluster as RC


@pytest.fixture(scope="module")
def ray_session():
    """One small Ray session (one CPU) for this module's tuning runs; nothing of it is left afterwards."""
    RC.init_ray(num_cpus=1)
    session = RC._SESSION[0]
    try:
        yield session
    finally:
        RC.shutdown_ray()
        assert not session_processes(session), "Ray processes outlived shutdown_ray()"


def _stop_pressed() -> None:
    """Deliver SIGINT to the main thread, as Jupyter's Stop does, and give the handler time to run."""
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    for _ in range(50):
        time.sleep(0.1)


# --- a search space the trainable cannot use, and the Stop button after it ------------------------------

def test_a_bad_search_space_says_the_trainables_error_first_and_stop_works_after(ray_session, default_sigint,
                                                                                 tmp_path, capfd):
    """One real tuning run (Ray is slow to start on 2 cores): its error, then Stop, whose handler Tuner.fit()
    replaced and run_tuner put back (test_tuning_failures.py checks the same when fit itself raises)."""
    import ray.exceptions

    usr1 = signal.getsignal(signal.SIGUSR1)
    with pytest.raises(T.TrialsFailed) as info:
        T.run_tuner("bad_lr", num_samples=2, max_t=1, scheduler="fifo", storage=tmp_path, verbose=0,
                    space={"lr": -1e-3, "hidden": 16, "batch_size": 64})
    message = str(info.value)
    lines = message.splitlines()
    assert lines[0] == "ValueError: Invalid learning rate: -0.001", message
    assert "search space" in message and "2 of 2 trials" in message
    assert "\x1b[" not in message and "Traceback" not in message and len(lines) <= 4, message
    assert isinstance(info.value.__cause__, ray.exceptions.RayError)          # Ray's own report, chained
    assert info.value._render_traceback_()[0].startswith("TrialsFailed: ValueError: Invalid learning rate")
    printed = capfd.readouterr()
    assert "Trial task failed" not in printed.out + printed.err, "Tune still printed each failed trial's traceback"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGINT)
    assert signal.getsignal(signal.SIGUSR1) == usr1
    with pytest.raises(KeyboardInterrupt):
        _stop_pressed()


# --- Ray's own processes stay off the network ----------------------------------------------------------

# A spy in every Python process started with this PYTHONPATH (the driver and each of Ray's processes):
# every name lookup and every TCP/UDP connection, written to a file of its own per process.
_SPY = '''
import os, socket, sys
_DIR = os.environ.get("NET_SPY_DIR")
if _DIR:
    def _note(kind, what):
        with open(os.path.join(_DIR, "%d.txt" % os.getpid()), "a") as f:
            f.write("%s\\t%s\\t%s\\n" % (kind, what, " ".join(sys.argv)[:160]))
    _note("start", "")
    _gai = socket.getaddrinfo
    def getaddrinfo(host, *a, **k):
        _note("lookup", host.decode() if isinstance(host, bytes) else host)
        return _gai(host, *a, **k)
    socket.getaddrinfo = getaddrinfo
    _connect, _connect_ex = socket.socket.connect, socket.socket.connect_ex
    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _note("connect", address[0])
        return _connect(self, address)
    def connect_ex(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            _note("connect", address[0])
        return _connect_ex(self, address)
    socket.socket.connect, socket.socket.connect_ex = connect, connect_ex
'''

# A notebook kernel that starts Ray on one node, runs a tiny job, shuts Ray down by hand, then starts it
# again on two nodes ("Run All again") and is killed with Ray running (the kernel dies, as in Jupyter).
_RAY_KERNEL = textwrap.dedent('''
    import glob, os, sys, time
    from helpers.launching import ray_cluster as rc
    import ray

    def a_job_and_the_dashboards_questions(session):
        home, slow = ray.get(ray.remote(lambda: (os.environ.get("HOME"), bool(__import__("jsonschema"))
                                                  and "rfc3987_syntax" in sys.modules)).remote())   # a tiny job
        deadline = time.monotonic() + 60   # the dashboard asks its questions right after it starts
        while time.monotonic() < deadline and not any(
                "Usage reporting is" in open(f).read() for f in glob.glob(session + "/session_*/logs/dashboard.log")):
            time.sleep(0.5)
        time.sleep(2)
        return f"{home} {slow}"

    rc.init_ray(num_cpus=2, nodes=1)
    first = rc._SESSION[0]
    home = a_job_and_the_dashboards_questions(first)
    rc.shutdown_ray()
    print("session", first, home, flush=True)
    rc.init_ray(num_cpus=2, nodes=2)                    # Run All again in the same kernel, on two nodes
    second = rc._SESSION[0]
    print("session", second, a_job_and_the_dashboards_questions(second), flush=True)
    time.sleep(600)
''')


def _local(host: str) -> bool:
    """Loopback, or an address of this machine itself (Ray's agents resolve the node's own IP)."""
    if host in (None, "", "None", "localhost"):   # None: getaddrinfo(None, port), an address to bind to
        return True
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False      # a name: resolving it may ask a DNS server
    own = {a.address.split("%")[0] for addrs in psutil.net_if_addrs().values() for a in addrs}
    return ip.is_loopback or ip.is_unspecified or str(ip) in own


def test_ray_stays_offline_and_leaves_nothing_after_shutdown_nor_after_its_kernel_is_killed(tmp_path):
    """init_ray (one node, then two) and a tiny job each, from a kernel that is then killed with Ray running:
    no name lookup and no connection leaves this machine, from the driver or from any of Ray's processes (no
    cloud metadata probe, no usage-stats report); tasks see the reader's HOME and import jsonschema without
    rfc3987_syntax; nothing of either session is left."""
    spy, calls = tmp_path / "spy", tmp_path / "calls"
    spy.mkdir()
    calls.mkdir()
    (spy / "sitecustomize.py").write_text(_SPY)
    env = {**os.environ, "NET_SPY_DIR": str(calls), "PYTHONPATH": os.pathsep.join(
        [str(spy), str(Path(__file__).resolve().parent.parent), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_USAGE_STATS_ENABLED", None)
    proc = subprocess.Popen([sys.executable, "-c", _RAY_KERNEL], env=env, stdout=subprocess.PIPE, text=True)
    try:
        runs = [line.split()[1:] for line in read_lines(proc.stdout, 2, 300, "session /")]
        assert len(runs) == 2, f"the kernel did not start Ray twice within 300 s: {runs}"
        (first, first_home, first_slow), (second, second_home, second_slow) = runs
        assert first_slow == second_slow == "False"   # helpers.launching.ray_cluster._lean_env: no 1.7 s grammar per worker
        assert not session_processes(first), "Ray processes outlived shutdown_ray()"
        assert session_processes(second)                                   # running again
    finally:
        proc.kill()                                                        # the kernel dies with Ray running
        proc.wait()
    deadline = time.monotonic() + 20
    while session_processes(second) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not session_processes(second), "Ray processes outlived the killed kernel"
    assert first_home == second_home == os.environ.get("HOME")             # tasks see the reader's HOME
    seen = [line.split("\t") for f in calls.glob("*.txt") for line in f.read_text().splitlines()]
    started = [who for kind, _, who in seen if kind == "start"]
    assert sum("ray/dashboard/dashboard.py" in who for who in started) == 2, started  # the spy was in every process
    outside = [(kind, host, who[:100]) for kind, host, who in seen if kind != "start" and not _local(host)]
    assert outside == [], "\n".join(map(str, outside))


def test_the_suites_clean_up_leaves_a_notebooks_ray_session_alone():
    """A Ray session a notebook keeps open while the tests run (its processes name a folder in the reader's
    usual Ray folder) is not the suite's: pytest_sessionfinish must neither end it nor fail the run over it."""
    from conftest import _leftovers
    from helpers.core.files import private_folder

    marker = str(private_folder("bog-ray-") / "a-notebooks-session")
    out = subprocess.run(["sh", "-c", f'{sys.executable} -c "import time; time.sleep(120)" {marker} >/dev/null 2>&1 & echo $!'],
                         capture_output=True, text=True, timeout=30,
                         env={k: v for k, v in os.environ.items() if k != "BEYOND_ONE_GPU_RAY_DIR"})  # not the suite's
    pid = int(out.stdout.split()[-1])          # reparented: not a child of this process, as a notebook's Ray is not
    try:
        assert [p.pid for p in session_processes(marker)] == [pid]
        assert pid not in [p.pid for p in _leftovers()]
        assert RC.ray_temp_dir() != private_folder("bog-ray-")
    finally:
        os.kill(pid, signal.SIGKILL)

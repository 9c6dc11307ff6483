"""Ray on this machine, one node or a real cluster of several, that leaves nothing behind (04).

:func:`init_ray` starts Ray (``ray.init``), or a cluster with ``ray start --head`` and
``ray start --address=…`` (asked for 127.0.0.1, which ``ray start`` replaces with this machine's own
IP, so the nodes listen on the network), protected by a token (:mod:`.ray_auth`), and connects this notebook as its
driver; :func:`shutdown_ray` ends every process of that Ray session, and a watchdog does if the
kernel dies first. Every process of a session is found by the session's own folder. Ray's own
processes stay off the network (:func:`_offline_env`), and :func:`keep_stop_handlers` gives
Jupyter's Stop back after a Tune (or Train) run.
"""
from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..core.files import private_folder
from ..core.procs import end_processes, free_port, session_processes, watch_parent
from .ray_auth import reread_ray_config, token_auth_refusal, use_token

_WATCHDOG = None  # the process that cleans up Ray if this kernel dies first

_SESSION = [""]  # the running Ray session's own folder: every process of the session names it


def ray_temp_dir() -> Path:
    """This user's private folder for Ray's sockets, logs and session files (04).

    Short (Ray's socket paths must stay under ~100 characters) and private (mode 700, owned by this
    user): a fixed shared name such as /tmp/beyond-one-gpu-ray can already exist on a shared
    machine, made by someone else and writable by all. If the usual folder is not ours and
    private, a fresh one is made. ``$BEYOND_ONE_GPU_RAY_DIR``, when set, is used instead: the test
    suite gives each of its runs a folder of its own, so that its clean-up ends only its own Ray
    sessions, never a notebook's or another run's.
    """
    chosen = os.environ.get("BEYOND_ONE_GPU_RAY_DIR")
    if chosen:
        path = Path(chosen)
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return path
    return private_folder("bog-ray-")


def _offline_env(session: Path) -> dict[str, str]:
    """The environment of Ray's own processes (not the trials'): usage stats off, and no cloud probe (04).

    ``RAY_USAGE_STATS_ENABLED=0`` alone does not keep Ray 2.x off the network. Its dashboard
    process (started even with ``include_dashboard=False``, for usage stats) first asks the cloud
    metadata services which cloud it runs on (169.254.169.254 twice and ``metadata.google.internal``:
    ``usage_lib.get_cloud_from_metadata_requests``) unless ``~/ray_bootstrap_config.yaml`` exists,
    before it looks whether usage stats are on; and a cluster of ``ray start`` nodes then tells
    usage-stats.ray.io that they are off. So Ray's processes get a ``HOME`` of their own in the
    session's folder, holding an empty bootstrap config, and a report URL no request can go to.
    Trials get the real ``HOME`` back (:func:`_worker_runtime_env`). If the reader turned usage
    stats on (``RAY_USAGE_STATS_ENABLED=1``), Ray's defaults stay.
    """
    if os.environ.get("RAY_USAGE_STATS_ENABLED", "0") != "0":
        return {}
    home = session / "home"
    home.mkdir(exist_ok=True)
    (home / "ray_bootstrap_config.yaml").write_text("{}\n")  # no cluster config: no cloud to detect
    return {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_REPORT_URL": "offline://", "HOME": str(home)}


def _lean_env(session: Path) -> dict[str, str]:
    """Keep one slow optional import out of Ray's Python processes and trials: 1–2 s of CPU each (04).

    ``import ray`` imports ``jsonschema``, which imports ``rfc3987_syntax`` when it is installed
    (JupyterLab's ``jupyter-events`` asks for ``jsonschema[format-nongpl]``), and that module builds a
    Lark parser of RFC 3987's grammar at import: about 1.7 s of the 2.4 s ``import ray`` took on a
    2-core AMD EPYC, paid by every worker Tune starts and every agent of every node. Ray validates
    no IRIs. A module of that name that raises ``ImportError``, first on ``PYTHONPATH``, makes
    jsonschema go without its IRI format check (``jsonschema/_format.py`` imports it inside
    ``suppress(ImportError)``). This kernel itself is left as it is.
    """
    from importlib.machinery import PathFinder

    if PathFinder.find_spec("rfc3987_syntax") is None:  # installed? (on sys.path: a None in sys.modules is no answer)
        return {}
    stubs = session / "stubs"
    stubs.mkdir(exist_ok=True)
    (stubs / "rfc3987_syntax.py").write_text('raise ImportError("kept out of Ray\'s processes by helpers")\n')
    return {"PYTHONPATH": os.pathsep.join(filter(None, (str(stubs), os.environ.get("PYTHONPATH"))))}


def _worker_runtime_env(env: dict[str, str]) -> dict | None:
    """The job's ``runtime_env``: tasks and trials see the reader's own ``HOME``, not the one of Ray's processes."""
    if "HOME" not in env:
        return None
    return {"env_vars": {"HOME": os.environ.get("HOME") or os.path.expanduser("~")}}


@contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` updated with ``env`` inside the block (for the processes ``ray.init`` starts), restored after."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextmanager
def keep_stop_handlers() -> Iterator[None]:
    """Put back the SIGINT (Jupyter's Stop, Ctrl+C) and SIGUSR1 handlers after a Ray Tune or Train run (04, 10).

    ``Tuner.fit()`` installs its own handler (a first Stop ends the run gracefully) and leaves it
    installed when it returns or raises, one per run, each passing the next Stop to the one before:
    after two runs, the next two Stops in the kernel only end runs that are already over. Every
    ``fit()`` of the course runs inside this block, which restores what was installed before.

    Example::

        with keep_stop_handlers():
            grid = tuner.fit()
    """
    if threading.current_thread() is not threading.main_thread():  # only the main thread has handlers
        yield
        return
    saved = {s: signal.getsignal(s) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        for s, handler in saved.items():
            if handler is not None:  # None: installed outside Python, cannot be put back
                signal.signal(s, handler)


_STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGUSR1") if hasattr(signal, n))


def _ray_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 90) -> None:
    """Run ``ray ARGS`` (the CLI of this environment's Ray) with ``env`` added; raise with its output if it fails."""
    cmd = [sys.executable, "-m", "ray.scripts.scripts", *args]
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(env or {})}
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode:
        raise RuntimeError(f"`ray {' '.join(args)}` failed (exit status {r.returncode}):\n{(r.stdout + r.stderr)[-2000:]}")


def init_ray(num_cpus: int | None = None, nodes: int = 1, quiet: bool = True) -> dict:
    """Start Ray on this machine, quietly; with ``nodes=2``, a real two-node cluster (04).

    ``nodes=1``: ``ray.init`` with every CPU (or ``num_cpus``) and every GPU. ``nodes=2``: a head
    node and a worker node started with ``ray start --head`` and ``ray start --address=…`` on
    this machine (``--node-ip-address=127.0.0.1``, which ``ray start`` replaces with the machine's own IP:
    the nodes listen on the network, and Ray's token authentication is what refuses others), the CPUs
    split between them (GPUs go to the head node only), and this notebook connects
    as the driver. Calling it again reuses what runs; asking for another size while Ray runs
    raises, saying to call :func:`shutdown_ray` first. Ray's processes are cleaned up by
    :func:`shutdown_ray`, and by a watchdog if the kernel dies first; they make no network call
    (usage stats off, no cloud-metadata probe: :func:`_offline_env`). Ray's environment (the token:
    :mod:`.ray_auth`) is set here, where the reader has not set it: importing the helpers sets none.

    Example::

        init_ray(nodes=2)          # two nodes on this machine
        run_tuner("asha", num_samples=8, max_t=3)
        shutdown_ray()
    """
    if num_cpus is not None and (not isinstance(num_cpus, int) or isinstance(num_cpus, bool) or num_cpus < 1):
        raise ValueError(f"num_cpus must be a positive int or None (every CPU), got {num_cpus!r}")
    if not isinstance(nodes, int) or isinstance(nodes, bool) or nodes < 1:
        raise ValueError(f"nodes must be a positive int, got {nodes!r}")
    cpus = num_cpus or os.cpu_count() or 1
    if nodes > cpus:
        raise ValueError(f"{nodes} nodes need at least one CPU each and {cpus} are available; use nodes<={cpus}")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # the classic table reporter, with chosen columns
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    use_token()  # here, never at import; and before Ray is imported, when it reads RAY_AUTH_MODE
    import ray

    if ray.is_initialized():
        res = ray.cluster_resources()
        alive = sum(n["Alive"] for n in ray.nodes())
        if (num_cpus is not None and int(res.get("CPU", 0)) != num_cpus) or alive != nodes:
            raise RuntimeError(f"Ray is already running here with {int(res.get('CPU', 0))} CPU(s) on {alive} node(s); "
                               f"call shutdown_ray() first to start it again with num_cpus={num_cpus}, nodes={nodes}")
    else:
        reread_ray_config()  # a Ray imported before use_token() read another mode
        refusal = token_auth_refusal() if nodes > 1 else None  # a cluster on the machine's IP needs the token
        if refusal:
            raise RuntimeError(f"init_ray(nodes={nodes}) refused: {refusal}")
        try:
            _start_ray(cpus, nodes, logging.ERROR if quiet else logging.INFO, not quiet)
        except BaseException:  # a failed or interrupted start leaves nothing behind
            shutdown_ray()
            raise
    if quiet:
        for name in ("ray", "ray.tune", "ray.train", "ray.data"):
            logging.getLogger(name).setLevel(logging.ERROR)
    res = ray.cluster_resources()
    return {"cpus": int(res.get("CPU", 0)), "gpus": int(res.get("GPU", 0)),
            "nodes": sum(n["Alive"] for n in ray.nodes())}


def _start_ray(cpus: int, nodes: int, log_level: int, log_to_driver: bool) -> None:
    """``ray.init`` on this machine, or ``ray start`` a head and worker nodes here and connect (Ray binds them to the machine's IP)."""
    import ray

    global _WATCHDOG

    # a folder of this session's own, inside this user's private one: every process of the session
    # names it (in its command line, its environment, or the log files it keeps open), which is how
    # shutdown_ray and the watchdog find them all, and nothing else
    temp = Path(tempfile.mkdtemp(prefix="", dir=ray_temp_dir()))
    _SESSION[0] = str(temp)
    os.environ["BEYOND_ONE_GPU_SESSION"] = _SESSION[0]
    try:
        _WATCHDOG = watch_parent(marker=_SESSION[0])  # if this kernel dies, its Ray processes go too
        env = {**_offline_env(temp), **_lean_env(temp)}
        workers = _worker_runtime_env(env)  # the reader's HOME, read before it changes below
        if nodes == 1:
            with _environ(env):  # ray.init starts Ray's processes from this one: they inherit its environment
                ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=log_to_driver, logging_level=log_level,
                         _temp_dir=str(temp), configure_logging=True, runtime_env=workers)
            return
        port = free_port()
        share = [cpus // nodes + (i < cpus % nodes) for i in range(nodes)]
        common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", f"--temp-dir={temp}"]
        # no autoscaler monitor (a fixed size); a log monitor only on the head, only if the driver reads logs
        logs = f"--include-log-monitor={str(log_to_driver).lower()}"  # one per machine: ray start --help
        _ray_cli("start", "--head", f"--port={port}", f"--num-cpus={share[0]}", "--include-dashboard=false",
                 "--no-monitor", logs, *common, env=env)
        for c in share[1:]:
            _ray_cli("start", f"--address=127.0.0.1:{port}", f"--num-cpus={c}", "--num-gpus=0", "--include-log-monitor=false", *common, env=env)
        ray.init(address=f"127.0.0.1:{port}", log_to_driver=log_to_driver, logging_level=log_level,
                 configure_logging=True, runtime_env=workers)
    finally:
        os.environ.pop("BEYOND_ONE_GPU_SESSION", None)  # Ray's processes have it; later ones of this kernel must not


def cluster_nodes() -> list[dict]:
    """The nodes of the running Ray cluster, from ``ray.nodes()``: address, CPUs, GPUs, alive (04)."""
    import ray

    return [{"node": n["NodeManagerAddress"] + ":" + str(n["NodeManagerPort"]), "alive": n["Alive"],
             "cpus": int(n["Resources"].get("CPU", 0)), "gpus": int(n["Resources"].get("GPU", 0)),
             "head": "node:__internal_head__" in n["Resources"]} for n in ray.nodes()]


def shutdown_ray(grace: float = 3.0) -> list[int]:
    """Stop Ray and every process of its session; return the pids that had to be ended by hand (04).

    ``ray.shutdown()`` disconnects this notebook (and stops a local Ray). The nodes of a cluster
    that :func:`init_ray` started, and any of Ray's agents that ignore SIGTERM, are then ended:
    every process carrying this session's marker, SIGTERM first, SIGKILL after ``grace`` seconds.
    Nothing else is touched (``ray stop`` would end every Ray on the machine). Safe to call when
    Ray is not running.
    """
    import ray

    global _WATCHDOG

    if ray.is_initialized():
        ray.shutdown()
    ended: list[int] = []
    if _SESSION[0]:
        watchdog = _WATCHDOG.pid if _WATCHDOG is not None else None
        ended = end_processes((p for p in session_processes(_SESSION[0]) if p.pid != watchdog), grace=grace)
        shutil.rmtree(_SESSION[0], ignore_errors=True)  # the session folder init_ray made: its logs and sockets
        _SESSION[0] = ""
    if _WATCHDOG is not None:
        _WATCHDOG.kill()
        _WATCHDOG.wait()
        _WATCHDOG = None
    return ended


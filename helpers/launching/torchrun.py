"""``torchrun`` from a notebook: the command line, and a run that leaves nothing behind (03).

:func:`run_torchrun` starts ``torchrun`` agents (one, or several "nodes" on this machine meeting
at a c10d rendezvous on 127.0.0.1, whose store this process hosts on a port it holds), each in a
process group of its own, and ends them all on a
timeout, a failure, Jupyter's Stop, or the kernel's death.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time

from torch.distributed import TCPStore

from ..core.device import gpu_count
from ..core.procs import kill_group, watch_parent


def torchrun_command(nproc: int = 2, nnodes: int = 1, endpoint: str | None = None,
                     script_args: tuple[str, ...] = (), module: str = "helpers.ddp.script",
                     agent_args: tuple[str, ...] = ()) -> list[str]:
    """The torchrun command line for a course script (``module``: 03's DDP script by default), one node or several (03, 10).

    ``agent_args``: more of torchrun's own options, e.g. ``("--max-restarts=1",)`` (10).

    Several nodes meet at a c10d rendezvous: every node runs the *same* command, and the
    rendezvous gives each its node rank (no ``--node_rank`` to set by hand).
    """
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={nproc}", *agent_args]
    if nnodes == 1 and endpoint is None:
        cmd.append("--standalone")  # a free local port is chosen for the rendezvous
    else:
        if endpoint is None:
            raise ValueError("several nodes need a rendezvous endpoint reachable by all, e.g. endpoint='10.0.0.1:29500'")
        cmd += [f"--nnodes={nnodes}", "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}", "--rdzv_id=beyond-one-gpu"]
    return cmd + ["-m", module, *script_args]


def _node_gpus(node: int, nnodes: int, nproc: int) -> dict[str, str]:
    """The GPUs a simulated node may see, so that "nodes" on one machine never share a GPU (03).

    Real nodes each have their own GPUs, and local rank r uses cuda:r on its node. Several nodes
    on one machine would all pick cuda:0 (nccl refuses two ranks on one GPU), so each gets its own
    slice of the GPUs through CUDA_VISIBLE_DEVICES, or none (the CPU, gloo) if there are too few.
    """
    if nnodes == 1:
        return {}
    if gpu_count() >= nnodes * nproc:
        return {"CUDA_VISIBLE_DEVICES": ",".join(str(node * nproc + i) for i in range(nproc))}
    return {"CUDA_VISIBLE_DEVICES": ""}


def loopback_aliases(addrs: tuple[str, ...] = ("127.0.0.2", "127.0.0.3")) -> tuple[str, ...] | None:
    """``addrs`` if this machine can bind each of them, else None (03).

    All of 127/8 is loopback (RFC 1122, 3.2.1.3): Linux answers on every such address, while macOS binds only
    127.0.0.1 until others are added (``sudo ifconfig lo0 alias 127.0.0.2``). Tried, not assumed.
    """
    for addr in addrs:
        try:
            with socket.socket() as s:
                s.bind((addr, 0))
        except OSError:
            return None
    return tuple(addrs)


def run_torchrun(nproc: int = 2, script_args: tuple[str, ...] = (), timeout: float = 90, nnodes: int = 1,
                 local_addrs: tuple[str, ...] = (), module: str = "helpers.ddp.script",
                 agent_args: tuple[str, ...] = (), env: dict[str, str] | None = None) -> str:
    """Run a course script (``module``, 03's DDP script by default) with torchrun and return what it printed (03, 10).

    ``nnodes=1``: ``torchrun --standalone --nproc_per_node N``. ``nnodes=2``: a real two-node launch
    on this machine: two torchrun agents, each a "node" with ``nproc`` processes, meeting at a c10d
    rendezvous on 127.0.0.1, whose store this process hosts on a port the system picks and holds until
    the agents are gone. Each agent runs in a process group of its own; all of
    them are killed if the run outlives ``timeout`` seconds, fails on one node, is interrupted
    (Jupyter's Stop), or if this kernel dies (a watchdog). Returns the agents' outputs, agent by agent (agent k: the k-th started, not node rank k).
    ``local_addrs``: agent k gets ``--local-addr=local_addrs[k]`` (the address it gives as its node's).
    """

    if not isinstance(nnodes, int) or nnodes < 1:
        raise ValueError(f"nnodes must be a positive int, got {nnodes!r}")
    if local_addrs and len(local_addrs) != nnodes:
        raise ValueError(f"local_addrs needs one address per node ({nnodes}), got {local_addrs!r}")
    # Several "nodes": this process hosts the rendezvous store on a port the system picks and holds it
    # for the whole run, so no other program can take the port between choosing it and using it.
    store = None if nnodes == 1 else TCPStore("127.0.0.1", 0, is_master=True)
    endpoint = None if store is None else f"127.0.0.1:{store.port}"
    cmd = torchrun_command(nproc, nnodes=nnodes, endpoint=endpoint, script_args=script_args, module=module,
                           agent_args=agent_args)
    if store is not None:  # every agent joins this store as a client instead of trying to host it
        cmd.insert(cmd.index(module) - 1, "--rdzv_conf=is_host=false")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", **(env or {})}
    outs = [tempfile.TemporaryFile("w+") for _ in range(nnodes)]
    cmds = [cmd[:3] + [f"--local-addr={a}"] + cmd[3:] for a in local_addrs] or [cmd] * nnodes
    agents = [subprocess.Popen(cmds[k], stdout=out, stderr=subprocess.STDOUT, text=True, env={**env, **_node_gpus(k, nnodes, nproc)},
                               start_new_session=True)
              for k, out in enumerate(outs)]
    watchdog = watch_parent(groups=[a.pid for a in agents])  # if this kernel dies, the agents and workers go too
    deadline = time.monotonic() + timeout
    try:
        while any(a.poll() is None for a in agents):
            if any(a.returncode not in (None, 0) for a in agents) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    finally:
        for a in agents:
            if a.poll() is None:
                kill_group(a.pid)
            a.wait()
        watchdog.kill()
        watchdog.wait()
        del store  # the agents are gone: free the rendezvous port
    texts = []
    for out in outs:
        out.seek(0)
        texts.append(out.read())
        out.close()
    text = texts[0] if nnodes == 1 else "\n".join(f"--- agent {i} ---\n{t}" for i, t in enumerate(texts))
    if time.monotonic() > deadline:
        raise TimeoutError(f"torchrun did not finish within {timeout:g} s and was killed with all its workers; "
                           f"the last of what it printed:\n{text[-3000:]}")
    if any(a.returncode != 0 for a in agents):
        codes = [a.returncode for a in agents]
        raise RuntimeError(f"torchrun exited with code(s) {codes}; its output:\n{text}")
    return text


"""From this machine to a real cluster (10): the Slurm batch script and the Ray commands, written as files, each
next to the local command it grows from, and checked as far as one machine can check them.

The local runs of notebooks 03, 04 and 10 already use the multi-node machinery: ``torchrun`` with a c10d
rendezvous (notebook 03's two agents) and ``ray start --head`` / ``ray start --address`` (``init_ray(nodes=2)``).
What changes on a cluster is who starts them and the addresses.
"""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

from ..launching.torchrun import torchrun_command

__all__ = ["slurm_script", "ray_cluster_script", "check_torchrun_args", "check_shell", "ray_start_options"]


def _torchrun(nodes: int, gpus: int, endpoint: str, script_args: tuple[str, ...]) -> list[str]:
    cmd = torchrun_command(gpus, nnodes=nodes, endpoint=endpoint, module="helpers.resilience.script",
                           agent_args=("--max-restarts=3",), script_args=script_args)
    return ["python", *cmd[1:]]


def slurm_script(nodes: int = 2, gpus: int = 8, epochs: int = 3, checkpoint: str = "$SLURM_SUBMIT_DIR/state.pt") -> str:
    """A Slurm batch script: one ``torchrun`` agent per node (``srun``), restarts, SIGTERM before the time limit (10).

    ``--signal=TERM@120``: Slurm sends SIGTERM to the job's steps about 120 s before its time limit (up to 60 s
    earlier: ``sbatch`` docs); the step is ``torchrun``, whose agent passes it on to the workers and kills them
    ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT`` s later (30 by default, ``torch/distributed/launcher/api.py``): set here to
    leave an epoch time to finish, where the script's ``Preemption`` saves and exits cleanly. ``--requeue`` lets
    the job be queued again after a node failure or a preemption, where the same command resumes from the
    checkpoint.
    """
    cmd = _torchrun(nodes, gpus, "$HEAD:29500", ("--epochs", str(epochs), "--checkpoint", checkpoint))
    cmd[cmd.index("--rdzv_id=beyond-one-gpu")] = "--rdzv_id=$SLURM_JOB_ID"
    return "\n".join([
        "#!/bin/bash",
        "#SBATCH --job-name=beyond-one-machine",
        f"#SBATCH --nodes={nodes}",
        "#SBATCH --ntasks-per-node=1      # one torchrun agent per node: it starts that node's ranks",
        f"#SBATCH --gpus-per-node={gpus}",
        "#SBATCH --signal=TERM@120        # SIGTERM to the job's steps ~120 s before the time limit",
        "#SBATCH --requeue                # queued again after a node failure or preemption: resumes",
        'HEAD=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)   # the rendezvous host',
        "export TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1   # a store per rendezvous round (section 3)",
        "export TORCH_ELASTIC_SHUTDOWN_TIMEOUT=110      # SIGTERM to SIGKILL, in torchrun (default 30 s)",
        "srun " + " ".join(cmd),
        ""])


def ray_cluster_script(port: int = 6379) -> str:
    """The commands that make a Ray cluster of several machines, and the driver's connection (10).

    With Ray's token authentication on, as :func:`~helpers.launching.ray_cluster.init_ray` has it for its local
    cluster: every node and the driver need ``RAY_AUTH_MODE=token`` and the same token (Ray's docs: "Ray token
    authentication"); ``ray start --head`` without them starts a cluster anyone on the network can use.
    """
    return "\n".join([
        "#!/bin/bash",
        "# token authentication, one shared secret: make it once (it is written to ~/.ray/auth_token):",
        "#   ray get-auth-token --generate",
        "# and copy that file to ~/.ray/auth_token on every other node and on the driver's machine,",
        "# where Ray looks for it (RAY_AUTH_TOKEN_PATH=FILE names another place)",
        "export RAY_AUTH_MODE=token   # on every node and for the driver",
        "# on the head node:",
        f"ray start --head --port={port}",
        "# on every other node (HEAD_IP: the head node's address):",
        f'ray start --address="$HEAD_IP:{port}"',
        "# then the driver, on the head node: the notebook's init_ray(nodes=2) becomes",
        "python -c 'import ray; ray.init(address=\"auto\"); print(ray.cluster_resources())'",
        ""])


def check_torchrun_args(script: str) -> list[str]:
    """Parse the ``torchrun`` line of ``script`` with torchrun's own parser; return its options (10).

    Raises ``SystemExit`` (argparse's way) if an option does not exist in this torch.
    """
    from torch.distributed.run import get_args_parser

    line = next(x for x in script.splitlines() if x.startswith("srun "))
    words = shlex.split(line.replace("$", "_"))   # no shell here: variables as words
    args = words[words.index("torch.distributed.run") + 1:]
    parsed = get_args_parser().parse_args(args)
    return [f"nnodes={parsed.nnodes}", f"nproc_per_node={parsed.nproc_per_node}", f"max_restarts={parsed.max_restarts}",
            f"rdzv_backend={parsed.rdzv_backend}", f"module={parsed.module}", f"training_script={parsed.training_script}"]


def check_shell(script: str, folder: Path) -> str:
    """``bash -n``: the script parses as shell (nothing runs); returns bash's complaint, or '' (10)."""
    path = Path(folder) / "check.sh"
    path.write_text(script)
    r = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    path.unlink()
    return r.stderr.strip()


def ray_start_options() -> set[str]:
    """The options ``ray start --help`` lists in this Ray (10)."""
    r = subprocess.run([sys.executable, "-m", "ray.scripts.scripts", "start", "--help"], capture_output=True, text=True,
                       timeout=60)
    return {w.split("=")[0].rstrip(",") for w in r.stdout.split() if w.startswith("--")}

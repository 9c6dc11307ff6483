"""Build notebooks/10_beyond_one_machine.ipynb (cells below; markdown in md10.py)."""
import sys
import nbformat
sys.path.insert(0, "/work/wt-10")
from helpers.publish import setup_cell
sys.path.insert(0, "/tmp/s16")
from md10 import MD

C = []
def md(cid): C.append(nbformat.v4.new_markdown_cell(MD[cid], id=cid))
def code(cid, src, tags=None):
    c = nbformat.v4.new_code_cell(src.strip("\n"), id=cid)
    if tags:
        c.metadata["tags"] = tags
    C.append(c)

md("title")
code("setup", setup_cell())
code("imports", r"""
import functools, signal, tempfile
from pathlib import Path
import torch
from helpers import check, show, hardware_label
from helpers.launching import launch, describe_launch
from helpers.resilience import (resumable_worker, save_state, load_state, Preemption, announce, announcements,
                                kill_when, recovery, ray_registered_epochs, run_torchrun, plot_restarts, init_ray, shutdown_ray,
                                ray_train_loop, run_ray_train, dcp_train_worker, plain_training, dcp_files,
                                save_blocking_worker, debug_detail, mismatched_collectives, skipped_barrier, what_it_said,
                                exercise_setup)
work = Path(tempfile.mkdtemp(prefix="beyond-one-machine-"))   # every file this notebook writes goes here
""")
md("resume-md")
code("resume-show", "show(save_state, load_state, Preemption, resumable_worker)")
code("whole", r"""
EPOCHS = 3
whole = launch(resumable_worker, 2, args=(EPOCHS, None), timeout=120)   # no checkpoint: the reference run
reference = whole[0]["params"]
print(f"{describe_launch(2)}: trained epochs {whole[0]['epochs_run']} without a stop")
""")
md("preempt-md")
code("preempt", r"""
folder = work / "preempted"; folder.mkdir()
ckpt = str(folder / "state.pt")
term = kill_when(str(folder), rank=0, epoch=0, sig=signal.SIGTERM, delay=0.05)   # mid-epoch 0, to rank 0 only
first = launch(resumable_worker, 2, args=(EPOCHS, ckpt, functools.partial(announce, str(folder))), timeout=120)
term["thread"].join(5)
print(f"SIGTERM to rank 0 (pid {term['pid']}) during epoch 0: each rank trained epochs "
      f"{[r['epochs_run'] for r in first]}, stopped on SIGTERM: {[r['stopped_on_sigterm'] for r in first]}")
again = launch(resumable_worker, 2, args=(EPOCHS, ckpt), timeout=120)   # a new launch, the same command
print(f"launched again: each rank trained epochs {[r['epochs_run'] for r in again]}")
assert [r["epochs_run"] for r in first] == [[0], [0]] and [r["epochs_run"] for r in again] == [[1, 2]] * 2
assert all(torch.equal(a, b) for a, b in zip(again[0]["params"], reference))   # bit for bit the uninterrupted run
""")
md("torchrun-md")
code("torchrun", r"""
folder = work / "torchrun"; folder.mkdir()
kill = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.05)   # mid-epoch 1, rank 1
out = run_torchrun(2, module="helpers.resilience.script", agent_args=("--max-restarts=1",), timeout=180,
                   script_args=("--epochs", str(EPOCHS), "--checkpoint", str(folder / "state.pt"),
                                "--out", str(folder / "params.pt"), "--announce-dir", str(folder)),
                   env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})   # a store of its own for each restart: below
kill["thread"].join(5)
print("\n".join(line for line in out.splitlines() if line.startswith("restart ")))
assert all(torch.equal(a, b) for a, b in zip(torch.load(folder / "params.pt"), reference))
runs = {"torchrun --max-restarts=1": recovery(announcements(str(folder)), kill["at"], rank=1)}
""")
md("ray-md")
code("ray-show", "show(ray_train_loop, run_ray_train)")
code("ray", r"""
resources = init_ray(nodes=2)
folder = work / "ray-killed"; folder.mkdir()
registered = lambda: 0 in ray_registered_epochs(str(work / "ray" / "killed"))   # epoch 0's checkpoint taken in
kill = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.0, ready=registered)
killed = run_ray_train(EPOCHS, storage=str(work / "ray"), name="killed", max_failures=1, announce_dir=str(folder))
kill["thread"].join(5)
shutdown_ray()
print(f"Ray Train on {resources['nodes']} nodes, {resources['cpus']} CPUs, rank 1 killed in epoch 1: "
      f"{killed['seconds']:.1f} s in all; last epoch reported {killed['metrics']['epoch']}")
assert max(float((a - b).abs().max()) for a, b in zip(killed["params"], reference)) < 1e-6
runs["Ray Train, FailureConfig(max_failures=1)"] = recovery(announcements(str(folder)), kill["at"], rank=1)
""")
code("cost", r"""
plot_restarts(runs, label=describe_launch(2));
for name, r in runs.items():
    print(f"{name}: resumed at epoch {r['resumed_epoch']}, {r['recovery_s']:.1f} s after the kill (the restart); "
          f"epoch {r['resumed_epoch']}'s work before the kill, redone: {r['redone_s']:.2f} s")
    print(f"  without a checkpoint the restart would begin at epoch 0 and redo all {r['kill_s']:.2f} s trained "
          "before the kill (this run's own times)")
""")
md("dcp-md")
code("dcp-save", r"""
path = str(work / "dcp")
launch(dcp_train_worker, 2, args=(path, 0, 3, True), timeout=120)   # 2 ranks: 3 steps, then dcp.save
files = dcp_files(path)
for name, size in files["files"].items():
    print(f"{name:>14}: {size:>7,} B" + (f", {files['items'][name]} items" if name in files["items"] else ""))
assert all(files["files"][f] == files["counted"][f] for f in files["counted"])
print(f"tensors saved: {files['tensor_bytes']:,} B")
""")
code("dcp-load", r"""
ref6 = plain_training(6)   # one process, unsharded, 6 steps
for n in (1, 4):
    out = launch(dcp_train_worker, n, args=(path, 3, 3, False), timeout=120)   # load on n ranks, 3 more steps
    diff = max(float((a - b).abs().max()) for a, b in zip(out[0]["params"], ref6))
    print(f"saved by 2 ranks, loaded by {n}, 3 more steps: largest difference from one process's 6 steps {diff:.1e}")
    assert diff < 1e-6
""")
code("dcp-async", r"""
t = launch(save_blocking_worker, 2, args=(str(work / "blocking"),), timeout=120)[0]
print(f"{t['bytes']:,} B per save on {describe_launch(2)}: dcp.save blocked training {t['save_s'] * 1e3:.0f} ms; "
      f"dcp.async_save returned after {t['async_returned_s'] * 1e3:.0f} ms and finished writing after "
      f"{t['async_done_s'] * 1e3:.0f} ms")
""")
md("hang-md")
code("hang-detail", r"""
try:
    with debug_detail():   # TORCH_DISTRIBUTED_DEBUG=DETAIL for the ranks launched inside
        launch(mismatched_collectives, 2, timeout=60, verbose=False)
except RuntimeError as e:
    said = what_it_said(str(e))
print("\n".join(said))
assert {s.split(":")[1].split()[0] for s in said} == {"ALLREDUCE", "BROADCAST"}   # both calls named
""")
code("hang-barrier", r"""
try:
    launch(skipped_barrier, 2, timeout=60, verbose=False)   # rank 1 never reaches the barrier
except RuntimeError as e:
    said = what_it_said(str(e))
print("\n".join(said))
assert said == ["Ranks 1 failed to pass monitoredBarrier in 2000 ms"]
""")
md("cluster-md")
code("cluster", r"""
from helpers.resilience import (slurm_script, ray_cluster_script, check_torchrun_args, check_shell,
                                torchrun_command)
slurm, ray_sh = slurm_script(nodes=2, gpus=8), ray_cluster_script()
(work / "train.sbatch").write_text(slurm); (work / "ray_cluster.sh").write_text(ray_sh)
print(slurm); print(ray_sh)
print("the local torchrun of section 3:", " ".join(torchrun_command(2, module="helpers.resilience.script",
                                                                      agent_args=("--max-restarts=1",))[3:]))
print("torchrun's own parser reads the batch script's line as:", ", ".join(check_torchrun_args(slurm)))
assert check_shell(slurm, work) == "" and check_shell(ray_sh, work) == ""   # both parse as shell (bash -n)
""")
code("cleanup", r"""
import shutil
print(f"removing {work}: " + ", ".join(sorted(p.name for p in work.iterdir())))
shutil.rmtree(work)   # this notebook's temporary folder, and nothing else
""")
md("exercises")
code("ex-resume", r"""
import os
from torch import nn

def train(epochs, path, on_epoch):
    model, optimizer, scheduler, loader = exercise_setup()
    start = 0
    if os.path.exists(path):
        ...   # your code: restore what the next epoch depends on, and set start
    for epoch in range(start, epochs):
        on_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
        scheduler.step()
        ...   # your code: save what a resumed run needs
    return model

check("10.resume", train)
""", tags=["long-cell:the exercise training loop with the two places to fill"])
code("ex-lost", r"""
lost_minutes = None   # your answer: minutes lost per failure, on average
check("10.lost_minutes", lost_minutes)
""")
md("recap")

nb = nbformat.v4.new_notebook(cells=C)
nb.metadata = {"course": {"rerun_drill": False, "why_not": "every launch and the Ray cluster end inside their cells; "
                          "each run writes in a new temporary folder"},
               "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
               "language_info": {"name": "python"}}
nbformat.write(nb, "/work/wt-10/notebooks/10_beyond_one_machine.ipynb")
print(len(C), "cells")

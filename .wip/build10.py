"""Build notebooks/10_beyond_one_machine.ipynb (cells below; markdown in md10.py)."""
import sys
import nbformat
sys.path.insert(0, "/work/wt-10")
from helpers.publish import setup_cell
from helpers.resilience.lesson import RESUME_SKELETON
sys.path.insert(0, "/work/wt-10/.wip")
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
import functools, os, signal, tempfile
from pathlib import Path
import torch
from helpers import check, show
from helpers.launching import launch, describe_launch
from helpers.resilience import (
    resumable_worker, rng_state, save_state, load_state, Preemption,      # 1-2: resume, SIGTERM
    announce, announcements, kill_when, recovery, plot_restarts, run_torchrun,  # 3: SIGKILL
    init_ray, shutdown_ray, ray_registered_epochs, ray_train_loop,        # 4: Ray Train
    run_ray_train, ray_train_trial, tune_ray_train,
    dcp_train_worker, plain_training, dcp_files, save_blocking_worker,    # 5: DCP
    debug_detail, mismatched_collectives, skipped_barrier, what_it_said,  # 6: hangs
    exercise_setup, leftover_processes)
work = Path(tempfile.mkdtemp(prefix="beyond-one-machine-"))   # every file this notebook writes
""")

md("resume-md")
code("resume-show", "show(rng_state, save_state, load_state, Preemption, resumable_worker)")
code("whole", r"""
EPOCHS = 3
whole = launch(resumable_worker, 2, args=(EPOCHS, None), timeout=120)   # no checkpoint: reference
reference = whole[0]["params"]
print(f"{describe_launch(2)}: trained epochs {whole[0]['epochs_run']} without a stop")
""")
md("preempt-md")
code("preempt", r"""
folder = work / "preempted"; folder.mkdir()
ckpt = str(folder / "state.pt")
say = functools.partial(announce, str(folder))   # each rank writes its pid as each epoch starts
term = kill_when(str(folder), rank=0, epoch=0, sig=signal.SIGTERM, delay=0.05)   # mid-epoch 0
first = launch(resumable_worker, 2, args=(EPOCHS, ckpt, say), timeout=120)
term["thread"].join(5)
print(f"SIGTERM to rank 0 (pid {term['pid']}) during epoch 0: each rank trained epochs "
      f"{[r['epochs_run'] for r in first]}, stopped on SIGTERM: "
      f"{[r['stopped_on_sigterm'] for r in first]}")
again = launch(resumable_worker, 2, args=(EPOCHS, ckpt), timeout=120)   # launched again, the same
print(f"launched again: each rank trained epochs {[r['epochs_run'] for r in again]}")
assert [r["epochs_run"] for r in first] == [[0], [0]]
assert [r["epochs_run"] for r in again] == [[1, 2], [1, 2]]
assert all(torch.equal(a, b) for a, b in zip(again[0]["params"], reference))   # bit for bit
""")
md("torchrun-md")
code("torchrun", r"""
folder = work / "torchrun"; folder.mkdir()
kill = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.05)   # mid-epoch 1
out = run_torchrun(2, module="helpers.resilience.script", agent_args=("--max-restarts=1",),
                   script_args=("--epochs", str(EPOCHS), "--checkpoint", str(folder / "state.pt"),
                                "--out", str(folder / "params.pt"), "--announce-dir", str(folder)),
                   env={"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"},   # a store per restart: above
                   timeout=180)
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
registered = lambda: 0 in ray_registered_epochs(str(work / "ray" / "killed"))   # epoch 0 taken in
kill = kill_when(str(folder), rank=1, epoch=1, sig=signal.SIGKILL, delay=0.0, ready=registered)
killed = run_ray_train(EPOCHS, storage=str(work / "ray"), name="killed", max_failures=1,
                       announce_dir=str(folder))
kill["thread"].join(5)
shutdown_ray()
print(f"Ray Train on {resources['nodes']} nodes, {resources['cpus']} CPUs, rank 1 killed in epoch 1"
      f": {killed['seconds']:.1f} s in all; last epoch reported {killed['metrics']['epoch']}")
assert max(float((a - b).abs().max()) for a, b in zip(killed["params"], reference)) < 1e-6
runs["Ray Train, FailureConfig(max_failures=1)"] = recovery(announcements(str(folder)), kill["at"],
                                                            rank=1)
""", tags=["nbval-ignore-output"])
code("cost", r"""
plot_restarts(runs, label=describe_launch(2));
for name, r in runs.items():
    print(f"{name}: resumed at epoch {r['resumed_epoch']}, {r['recovery_s']:.1f} s after the kill "
          f"(the restart); epoch {r['resumed_epoch']}'s work before the kill, redone: "
          f"{r['redone_s']:.2f} s")
    print(f"  without a checkpoint the restart would begin at epoch 0 and redo all "
          f"{r['kill_s']:.2f} s trained before the kill (this run's own times)")
""")
md("tune-md")
code("tune-show", "show(ray_train_trial, tune_ray_train)")
code("tune", r"""
cpus = os.cpu_count() or 1
if cpus >= 4:   # two trials side by side, each a driver and one worker: one CPU each
    resources = init_ray(nodes=2)
    grid = tune_ray_train([1e-3, 3e-3], epochs=2, storage=str(work / "tune"), workers=1,
                          cpus=resources["cpus"])
    shutdown_ray()
    for r in sorted(grid, key=lambda r: r.config["lr"]):
        print(f"lr {r.config['lr']:g}: validation accuracy {r.metrics['val_acc']:.3f} "
              f"after {r.metrics['epoch'] + 1} epochs")
    assert len(grid) == 2 and not grid.errors
else:
    print(f"skipped: {cpus} CPUs here, and two trials side by side need 4 (a driver and a worker "
          "each). With 4 or more, this cell tunes the learning rate over two Ray Train runs and "
          "prints each run's validation accuracy; `python -m helpers.bench resilience` runs it with "
          "2 CPUs or more, one trial at a time on 2 or 3.")
""", tags=["nbval-ignore-output"])
md("dcp-md")
code("dcp-save", r"""
path = str(work / "dcp")
launch(dcp_train_worker, 2, args=(path, 0, 3, True), timeout=120)   # 2 ranks: 3 steps, dcp.save
files = dcp_files(path)
for name, size in files["files"].items():
    items = f", {files['items'][name]} items" if name in files["items"] else ""
    print(f"{name:>14}: {size:>7,} B{items}")
assert all(files["files"][f] == files["counted"][f] for f in files["counted"])   # every byte
params = plain_training(0)   # the model's parameters, unsharded
# weights and Adam's two running averages (4 bytes per number), and Adam's step: 4 bytes per tensor
state = 3 * sum(p.numel() * p.element_size() for p in params) + 4 * len(params)
print(f"tensors saved: {files['tensor_bytes']:,} B; the model's and Adam's state: {state:,} B")
assert files["tensor_bytes"] == state
""")
code("dcp-load", r"""
ref6 = plain_training(6)   # one process, unsharded, 6 steps
for n in (1, 4):
    out = launch(dcp_train_worker, n, args=(path, 3, 3, False), timeout=120)   # load, 3 more steps
    diff = max(float((a - b).abs().max()) for a, b in zip(out[0]["params"], ref6))
    print(f"saved by 2 ranks, loaded by {n}, 3 more steps: largest difference from one process's "
          f"6 steps {diff:.1e}")
    assert diff < 1e-6
""")
code("dcp-async", r"""
t = launch(save_blocking_worker, 2, args=(str(work / "blocking"),), timeout=120)[0]
print(f"{t['bytes']:,} B per save on {describe_launch(2)}: dcp.save blocked training "
      f"{t['save_s'] * 1e3:.0f} ms; dcp.async_save returned after "
      f"{t['async_returned_s'] * 1e3:.0f} ms and finished writing after "
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
""", tags=["nbval-ignore-output"])
md("cluster-md")
code("cluster", r"""
from helpers.resilience import (slurm_script, ray_cluster_script, check_torchrun_args, check_shell,
                                torchrun_command)
slurm, ray_sh = slurm_script(nodes=2, gpus=8), ray_cluster_script()
(work / "train.sbatch").write_text(slurm)
(work / "ray_cluster.sh").write_text(ray_sh)
print(slurm)
print(ray_sh)
local = torchrun_command(2, module="helpers.resilience.script", agent_args=("--max-restarts=1",))
print("the local torchrun of section 3:", " ".join(local[3:]))
print("torchrun's own parser reads the batch script's line as:",
      ", ".join(check_torchrun_args(slurm)))
assert check_shell(slurm, work) == "" and check_shell(ray_sh, work) == ""   # both parse (bash -n)
""")
code("cleanup", r"""
import shutil
print(f"removing {work}: " + ", ".join(sorted(p.name for p in work.iterdir())))
shutil.rmtree(work)   # this notebook's temporary folder, and nothing else
assert leftover_processes() == []   # every rank and torchrun agent started above has ended
# (Ray's processes leave this kernel's process tree: shutdown_ray ended them by their session folder)
""")
md("exercises")
code("ex-resume", RESUME_SKELETON.replace("import os\n", "") + """
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

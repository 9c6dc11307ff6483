MD = {}
MD["title"] = """# 10 · Beyond one machine: a worker that dies, preemption, Ray Train, checkpoints that reshard

Notebooks 03–09 ran one job on one machine from start to end. A job on many machines for hours meets
failures: a node fails, a cloud reclaims a spot instance, the out-of-memory killer ends a process. The job then
has to stop, start again and go on from where it was, and the result should not depend on whether it was
interrupted. This notebook makes such failures on this machine (a worker killed, a job told to stop) and
recovers from them with the real engines: `torchrun`'s restarts, Ray Train on the course's local two-node Ray
cluster, and `torch.distributed.checkpoint` (DCP). Every
interrupted run below is compared with the same training run without interruption.

**Learning goals**
- Say which state a training run must save so that a resumed run equals an uninterrupted one, and write it.
- Turn SIGTERM, the warning a scheduler sends before it stops a job, into a clean save and exit.
- Let `torchrun --max-restarts` and Ray Train's `FailureConfig` restart a job whose worker was killed, and
  measure what the failure cost with a checkpoint, and estimate from the same run what it would cost without.
- Run the course's DDP training as a Ray Train `TorchTrainer`, and map it onto the launcher and `torchrun`.
- Save an FSDP2 model with DCP on 2 ranks and load it on 1 and on 4; measure what `async_save` hides.
- Name a hang: what `TORCH_DISTRIBUTED_DEBUG=DETAIL` and `monitored_barrier` say.
"""
MD["resume-md"] = """## 1. A run that can stop and go on

What does the next epoch depend on? The model's weights; the optimizer's state (Adam keeps, for each parameter
tensor, two running averages and a step count); a learning-rate scheduler's state, where there is one (this
training has none); the epoch number, from which `DistributedSampler.set_epoch` makes that epoch's data order
([its docs](https://docs.pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler));
and the random-number state of each rank (the CPU generator's, and its GPU's when the rank uses one), which
dropout and random augmentations draw from. `save_state` writes them after every epoch, and `load_state`
restores them. Nothing this training computes depends on the global random state (the model has no dropout,
and `DistributedSampler` shuffles with a generator of its own, seeded from the epoch; the `DataLoader` does draw
a seed from it each epoch, for worker processes it does not have here), so the asserts below check the weights,
the optimizer and the epoch; the exercise at the end, with dropout and a shuffled loader, checks the random state
too. `torchrun`'s docs ask every script for such a save and load: "When any number of workers fail we
restart all the workers with the same program arguments so you will lose progress up to the most recent
checkpoint" ([Train script, 3.](https://docs.pytorch.org/docs/stable/elastic/train_script.html)): what was done
since that checkpoint is lost.
The file is written under another name and then renamed over the old one (`os.replace`), so a rank killed
while writing leaves the last complete checkpoint, not half of a new one.
"""
MD["preempt-md"] = """## 2. Preemption: SIGTERM, save, exit, launch again

A scheduler that needs the machine back first sends SIGTERM, and kills the process only after a grace period
([Kubernetes: termination of
Pods](https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination); Slurm's preemption, with
the `GraceTime` a site may set: [Preemption](https://slurm.schedmd.com/preempt.html)). Section 7 adds Slurm's warning before a
job's own time limit. A cloud reclaiming a spot instance gives a notice instead (on AWS, two minutes ahead, in the
instance's metadata: [Spot Instance interruption
notices](https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html)), which a
watcher on the node can turn into the same SIGTERM. A process that
dies on SIGTERM loses the epoch it was in. `Preemption` only notes the signal; after each epoch's checkpoint
the ranks agree, with an all-reduce, whether any of them was asked to stop, so that all leave at the same
epoch. Below, rank 0 alone gets SIGTERM in the middle of epoch 0; the same launch, run again, resumes.
"""
MD["torchrun-md"] = """## 3. A worker dies: `torchrun` restarts the group

SIGKILL cannot be caught: it is how the out-of-memory killer ends a worker. `torchrun`'s agent "monitors
workers and upon detecting worker failures or unhealthiness, tears down all workers and restarts everyone"
([Elastic Agent](https://docs.pytorch.org/docs/stable/elastic/agent.html)), at most `--max-restarts` times.
The restarted workers run the script from its start: they resume from what the checkpoint holds, and nothing
else. Below, rank 1 is killed in the middle of epoch 1 while its agent lives on; `helpers/resilience/script.py`
is `resumable_worker` behind `torchrun`'s command line. A node that fails takes its agent with it: the other
agents' next rendezvous then waits, up to its join timeout, for a new node's agent to join, or, started with
`--nnodes=MIN:MAX`, goes on with fewer nodes while at least MIN remain
([torchrun](https://docs.pytorch.org/docs/stable/elastic/run.html)). If the failed node held the rendezvous
endpoint, the rendezvous store went with it (the agent on the endpoint's host serves it: `_create_tcp_store` in
[c10d_rendezvous_backend.py](https://github.com/pytorch/pytorch/blob/v2.14.1/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py)),
and only the scheduler starting the job again helps.

One setting matters for the restart itself. By default the agent lends the workers' process group the store it
made for its first rendezvous (the key-value store where ranks leave their addresses), and the same one again for
every restart, while the process group's
code assumes a new store for each retry ("We create a new TCPStore for every retry so no need to add prefix for
each attempt", `_create_c10d_store` in
[rendezvous.py](https://github.com/pytorch/pytorch/blob/v2.14.1/torch/distributed/rendezvous.py)).
[pytorch#135712](https://github.com/pytorch/pytorch/issues/135712) reports restarted ranks whose connections
are refused under nccl. With `TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1` each rendezvous round has a store of its own,
as in this notebook, which does not show the failure
(`use_agent_store` in [dynamic_rendezvous.py](https://github.com/pytorch/pytorch/blob/v2.14.1/torch/distributed/elastic/rendezvous/dynamic_rendezvous.py));
`python -m helpers.bench resilience` counts how many restarts fail with and without it on your machine (with
gloo; this machine's counts are in the README's results table).
"""
MD["ray-md"] = """## 4. Ray Train: the same training as a `TorchTrainer`

[Ray Train](https://docs.ray.io/en/latest/train/train.html) starts the workers itself, as Ray actors on the
cluster's nodes, joins them in a process group (gloo on CPUs, nccl on GPUs) and runs one function on each.
`ray_train_loop` is the same training: `digits_setup` builds the same model, optimizer and sampler, so the data
order and the weights are those of the course's launcher. After each epoch every worker calls
`ray.train.report`, rank 0 with a checkpoint directory; with `FailureConfig(max_failures=1)` Ray Train restarts
the worker group once after a worker dies, and `ray.train.get_checkpoint()` gives the restarted workers the last
checkpoint it registered ([fault tolerance](https://docs.ray.io/en/latest/train/user-guides/fault-tolerance.html)).

*Registered* is the word to read twice. Ray Train's *controller* is an actor it starts on the driver's node: it
starts the worker group, polls it, collects the workers' reports and keeps the list of checkpoints. A report waits
in its worker (in a queue of one: `worker.py` in `ray/train/v2/_internal/execution/worker_group/`) until the
controller's next poll, every `RAY_TRAIN_HEALTH_CHECK_INTERVAL_S` seconds (2 by default, in
`ray/train/v2/_internal/constants.py`; `run_ray_train` sets 0.2 for this notebook's epochs of a fraction of a
second), and the controller registers an epoch's checkpoint (rank 0's) only once it holds every worker's report
of that epoch (`ray/train/v2/_internal/execution/checkpoint/report_handler.py`). A worker killed before that
poll takes its report with it, and that epoch's checkpoint is never registered. So the kill below waits until the
controller has registered epoch 0's checkpoint: it rewrites `checkpoint_manager_snapshot.json` in the run's
folder each time (`ray_registered_epochs` reads it). The warning Ray prints below ("A worker died or was killed
…") is that kill.

| | course launcher | `torchrun` | Ray Train |
|---|---|---|---|
| start the ranks | `launch(fn, 2)` | `torchrun --nproc_per_node 2 script.py` | `TorchTrainer(fn, scaling_config=ScalingConfig(num_workers=2))` |
| rank, world size | `fn(rank, world_size)` | `RANK`, `WORLD_SIZE` | `ray.train.get_context().get_world_rank()`, `.get_world_size()` |
| process group | made by the launcher | `init_process_group()` in the script | made by Ray Train |
| data sharding | `DistributedSampler` | `DistributedSampler` | `DistributedSampler` (or `prepare_data_loader`) |
| checkpoint | a file the script writes | a file the script writes | `ray.train.report(..., checkpoint=...)` |
| after a failure | the error, raised | `--max-restarts` | `FailureConfig(max_failures=...)` |
| result | each rank's return value | what the script writes | `Result` (metrics, checkpoint) |
"""
MD["tune-md"] = """### Tuning a distributed trainer

Notebook 04 tuned a function that trained in one process. To tune a distributed run, each Tune trial becomes the
*driver* of a Ray Train run: Tune calls `ray_train_trial` once per trial with that trial's learning rate, and it
builds and fits a `TorchTrainer`; `TuneReportCallback` passes each report of the trainer's rank 0 on to the trial.
This replaces the older `Tuner(trainer)`, deprecated in Ray Train v2 ([Hyperparameter Tuning with Ray
Tune](https://docs.ray.io/en/latest/train/user-guides/hyperparameter-optimization.html)). A trial's driver takes one
CPU (Tune's default) and its workers one each, so `tune_ray_train` lets as many trials run at once as the cluster
has CPUs for (`max_concurrent_trials`, as that guide advises).
"""
MD["dcp-md"] = """## 5. Checkpoints that reshard: DCP

With FSDP2 each rank holds a shard of every parameter and of Adam's state. `torch.distributed.checkpoint`
(DCP) saves the shards as they are, each rank its own file, plus one `.metadata` file that says which piece of
which tensor is where; loading reads what the ranks *now* need, however many there are
([DCP docs](https://docs.pytorch.org/docs/stable/distributed.checkpoint.html)). `get_state_dict` and
`set_state_dict` give the model's and the optimizer's state in that form. Below, 2 ranks train 3 steps and
save; then 1 rank and 4 ranks load it and train 3 more, against one process that trained 6. The two ranks' files
differ in size: an entry that every rank holds whole (Adam's step counts, the optimizer's settings) is written
once, by one rank (`dedup_save_plans` in
[_dedup_save_plans.py](https://github.com/pytorch/pytorch/blob/v2.14.1/torch/distributed/checkpoint/_dedup_save_plans.py)). The last cell times
what a save costs the training: `dcp.save` returns when the files are written; `dcp.async_save` first copies the
state into CPU memory, then returns a future and writes in a background thread, so training can go on while it
writes ([`async_save`](https://docs.pytorch.org/docs/stable/distributed.checkpoint.html#torch.distributed.checkpoint.state_dict_saver.async_save)).
"""
MD["hang-md"] = """## 6. When the job hangs instead of dying

A collective waits until every rank of the group calls it. Ranks that call different collectives at the same
point, or a rank that never arrives, leave the others waiting until the process group's timeout. Two tools
name the culprit sooner ([Debugging torch.distributed applications](https://docs.pytorch.org/docs/stable/distributed.html#debugging-torch-distributed-applications)):
with `TORCH_DISTRIBUTED_DEBUG=DETAIL` every collective is first checked against the other ranks'; and
`dist.monitored_barrier` (gloo) waits with a timeout and names the first rank that did not arrive, or all of
them with `wait_all_ranks=True` (used here). PyTorch's Flight Recorder keeps a record of each rank's last
collectives for the same question
([tutorial](https://docs.pytorch.org/tutorials/unstable/flight_recorder_tutorial.html)); this notebook does not
run it. DETAIL numbers a group's collectives from 0, and the launcher's own barrier after joining the group is
number 0: the first collective of the function launched below is number 1.
"""
MD["cluster-md"] = """## 7. From here to a real cluster

Nothing above needs more than one machine, yet it is the multi-node machinery: `torchrun` with a c10d rendezvous
(notebook 03 ran two agents that met at one), and `init_ray(nodes=2)` starts its nodes with `ray start --head` and
`ray start --address` (`_start_ray` in [ray_cluster.py](../helpers/launching/ray_cluster.py)). On a cluster the
same commands run on several machines; what changes is who starts them, the addresses, where checkpoints live
(a path every node reads and writes: a shared filesystem or cloud storage, for the script's `--checkpoint` as
for Ray Train's `storage_path`: [Configuring Persistent
Storage](https://docs.ray.io/en/latest/train/user-guides/persistent-storage.html)), and the secret:
`init_ray` turns on Ray's token authentication with a token it makes (unless you set one), and on a cluster every node and the
driver need `RAY_AUTH_MODE=token` and the same token
([Ray token authentication](https://docs.ray.io/en/latest/ray-security/token-auth.html)). Below, a Slurm batch
script and the Ray commands are written to files and checked as far as one machine can: the shell parses both
(`bash -n`) and `torchrun`'s own parser reads the batch script's command. The `#SBATCH` options are [sbatch's](https://slurm.schedmd.com/sbatch.html): one task per
node runs one `torchrun` agent there; `--signal=TERM@120` has Slurm send SIGTERM to the job's steps about 120 s
before its time limit (up to 60 s earlier, sbatch's docs say), for section 2's save-and-exit; `--requeue` lets
the job be queued again after a node failure or a preemption. The step runs `torchrun`'s agent, which passes SIGTERM on
to the workers and kills them with SIGKILL after `TORCH_ELASTIC_SHUTDOWN_TIMEOUT` seconds (30 by default,
`launcher/api.py` in torch), so the script sets it long enough for an epoch to finish and save. On Kubernetes,
[KubeRay](https://docs.ray.io/en/latest/cluster/kubernetes/index.html) runs the same `ray start` commands in pods.
"""
MD["exercises"] = """## Exercises

1. **Code.** `train(epochs, path, on_epoch)` below trains a small model with dropout, Adam, a learning rate that
   decays each epoch (`LambdaLR`) and a shuffled loader. Fill in the two places so that a run stopped after any epoch and
   started again with the same `path` ends exactly where an uninterrupted run ends. The check stops runs after
   various epochs and starts them again as a new process would (from the random state `exercise_setup` leaves,
   not where the stopped run was), and compares the
   epochs trained, the optimizer steps taken and the final parameters.
2. A job saves a checkpoint every 30 minutes. A node fails at a moment spread evenly between two checkpoints,
   and starting again on a new node (processes, process group, loading the checkpoint) takes 4 minutes. How
   many minutes of the job's time does one failure cost, on average?
"""
MD["recap"] = """## Recap

- A resumed run equals an uninterrupted one when the checkpoint holds everything the next epoch reads: weights,
  optimizer state, a learning-rate scheduler's state
  where there is one, the next epoch (the sampler's order follows from it)
  and each rank's random state; written whole or not at all (`os.replace`). Asserted bit for bit after SIGTERM
  (section 2) and after SIGKILL (3), for a training whose results depend on no random draw; the exercise checks a
  run whose results do.
- SIGTERM is a warning, not an end: note it, finish the epoch, save, agree across ranks, exit; the same launch
  resumes.
- `torchrun --max-restarts` and Ray Train's `FailureConfig(max_failures=...)` restart the whole group; what a
  failure costs is the restart plus the work since the last checkpoint (the figure of section 4). Give a restarted
  `torchrun` group a store of its own (`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`); in Ray Train a checkpoint counts
  once the controller has registered it.
- DCP writes one file per rank and a `.metadata` that maps the pieces; a checkpoint saved by 2 ranks loads on 1 and
  on 4 and training goes on as one process's would. `async_save` returns after copying the state to memory.
- A hang has a name: `TORCH_DISTRIBUTED_DEBUG=DETAIL` reports the ranks' different collectives,
  `monitored_barrier` the rank that never came.
"""

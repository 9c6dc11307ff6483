"""DataParallel's steps on any machine, timed and accounted; threads against processes (02).

On a CPU, ``torch.nn.parallel``'s primitives do not run (even ``parallel_apply`` needs CUDA), so
:func:`four_steps_cpu` does the same four steps with plain tensor operations and Python threads
(a simulation of DataParallel's design, said wherever it runs). The rest measures: what each
step costs, the bytes each device holds, and where the GIL stops threads.
"""
from __future__ import annotations

import contextlib
import copy
import threading
import weakref

import torch
from torch import nn
from torch.func import functional_call

from ..core.data import digits_batch
from ..core.device import gpu_count
from ..core.i18n import tr
from ..core.measure import max_abs_diff, run_threads
from ..core.models import DigitsCNN
from .memory import output_device_accounting
from .recipe import four_steps_gpu
from .timing import timed, timing

__all__ = ["four_steps_cpu", "copied_bytes", "optimizer_state_bytes", "run_four_steps", "batchnorm_gradient_gap", "LABELS",
           "run_threads_one_intraop", "omp_threads_at_thread_start", "saves_its_output"]

LABELS = {"single": "1 thread, whole batch", "threads_forward_only": "2 threads forward, backward + SGD on main",
          "threads_forward_backward": "2 threads, forward + backward"}  # the ways thread_variants (speed.py) times


def run_threads_one_intraop(fn, n: int) -> None:
    """:func:`run_threads` with the caller's ``torch.get_num_threads()`` set at the top of every thread (02).

    Under ``torch_threads(1)`` that is one intra-op thread in each. ``set_num_threads`` in the
    calling thread does not reach a new thread's own OpenMP setting: that starts at the default
    (the cores) until the thread's first ``at::parallel_for``, and a oneDNN convolution run before
    that reads it (:func:`omp_threads_at_thread_start` shows both).
    """
    caller = torch.get_num_threads()

    def like_caller(i: int) -> None:
        torch.set_num_threads(caller)
        fn(i)

    run_threads(like_caller, n)


def _omp_max_threads():
    """``omp_get_max_threads`` of the OpenMP library torch uses, or None where it cannot be found (Linux only).

    Other packages bring their own copy (scikit-learn's ``libgomp-….so``), each with its own
    setting: the one torch uses is the one that follows ``torch.set_num_threads`` in this thread.
    """
    import ctypes
    import re
    try:
        with open("/proc/self/maps") as f:
            libs = sorted({line.split()[-1] for line in f
                           if re.match(r"lib[gi]?omp[-.0-9a-f]*\.so", line.rsplit("/", 1)[-1].strip())})
    except OSError:
        return None
    gets = []
    for lib in libs:
        with contextlib.suppress(OSError, AttributeError):
            gets.append(ctypes.CDLL(lib).omp_get_max_threads)
    old = torch.get_num_threads()
    probe = 2 if old == 1 else 1
    torch.set_num_threads(probe)
    try:
        gets = [g for g in gets if g() == probe]
    finally:
        torch.set_num_threads(old)
    return next((g for g in gets if g() == old), None)


def omp_threads_at_thread_start() -> dict | None:
    """OpenMP's thread count at the start of a fresh Python thread, with and without :func:`run_threads_one_intraop` (02).

    Read while the main thread is set to 1: ``{"plain": …, "set_in_thread": …}``; None where the
    OpenMP library cannot be read (not Linux, or torch built without OpenMP).
    """
    from ..core.measure import torch_threads

    get = _omp_max_threads()
    if get is None:
        return None
    seen: dict[str, int] = {}

    def plain(i: int) -> None:
        seen["plain"] = get()

    def inside(i: int) -> None:
        seen["set_in_thread"] = get()

    with torch_threads(1):
        run_threads(plain, 1)
        run_threads_one_intraop(inside, 1)
    return seen


def saves_its_output(model: nn.Module, x: torch.Tensor) -> bool:
    """Whether autograd saves ``model(x)``'s output for backward (read with saved-tensor hooks) (02)."""
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.untyped_storage().data_ptr())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        out = model(x)
    return out.untyped_storage().data_ptr() in saved


_SHELLS: "weakref.WeakKeyDictionary[nn.Module, dict[int, list[nn.Module]]]" = weakref.WeakKeyDictionary()


def _shells(model: nn.Module, n: int) -> list[nn.Module]:
    """Structural copies of ``model``, one per thread, made once per model (parameters come from the replicas).

    Keyed by the model itself, held weakly: an ``id()`` is reused once a model is freed, and a
    new model of another architecture must not get the old one's shells.
    """
    per_model = _SHELLS.setdefault(model, {})
    if n not in per_model:
        per_model[n] = [copy.deepcopy(model) for _ in range(n)]
    return per_model[n]


def _record_node_threads(loss: torch.Tensor, threads: list[int]) -> int:
    """A pre-hook on every node of ``loss``'s backward graph, appending the thread that runs it to ``threads``.

    Returns the number of nodes hooked.
    """
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        node.register_prehook(lambda grads: threads.append(threading.get_ident()))
        stack.extend(f for f, _ in node.next_functions)
    return len(seen)


def four_steps_cpu(model: nn.Module, x: torch.Tensor, y: torch.Tensor, n: int = 2,
                   record_backward_threads: bool = False) -> dict:
    """The same four steps on a CPU: chunks, autograd-connected parameter copies, threads, a concat (02).

    ``p.clone()`` is what ``replicate`` does per other device (a copy that autograd connects back
    to the original), so ``backward`` sums the replicas' gradients onto the original parameters;
    replica 0 uses the original parameters, as DataParallel's replica on ``device_ids[0]`` does.
    Only the step itself runs here (timed per step); the memory accounting is a separate call.
    With ``record_backward_threads`` every node of the backward graph (each replica's, the gather's,
    the loss's, the leaves' ``AccumulateGrad``) records which thread runs it, through a pre-hook.
    """
    times: dict[str, float] = {}
    inputs = timed(times, "scatter", lambda: list(x.chunk(n)))
    params = dict(model.named_parameters())
    # replica 0 is the module itself, as DataParallel's replica on device_ids[0] shares its storage
    replicas = timed(times, "replicate", lambda: [params] + [{k: p.clone() for k, p in params.items()}
                                                             for _ in inputs[1:]])
    outputs: list[torch.Tensor | None] = [None] * len(inputs)
    shells = _shells(model, len(inputs))  # one module per thread: functional_call swaps parameters in place
    backward_threads: list[int] = []
    nodes = 0

    def run(i: int) -> None:
        outputs[i] = functional_call(shells[i], replicas[i], (inputs[i],))

    timed(times, "apply", lambda: run_threads_one_intraop(run, len(inputs)))
    out = timed(times, "gather", lambda: torch.cat(outputs))  # onto the output device (here: the same CPU)
    loss = nn.functional.cross_entropy(out, y)
    if record_backward_threads:
        nodes = _record_node_threads(loss, backward_threads)
    timed(times, "backward", loss.backward)
    return {"path": tr("02.path_cpu", "plain tensor ops and {n} Python threads on the CPU", n=len(inputs)),
            "times": times,
            "loss": loss.item(), "tensors": {"x": x, "inputs": inputs, "params": params, "replicas": replicas,
                                             "outputs": outputs, "out": out},
            "backward_threads": backward_threads, "backward_nodes": nodes}


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def copied_bytes(tensors: dict) -> dict:
    """Bytes each of scatter, replicate and gather wrote into new memory in a CPU step, read from storages (02).

    A chunk that shares its storage with the batch is a view (no copy); a replica or the gathered
    output with a storage of its own is a copy.
    """
    x, out = tensors["x"], tensors["out"]
    nbytes = lambda t: t.numel() * t.element_size()  # noqa: E731
    scatter = sum(nbytes(c) for c in tensors["inputs"] if _storage(c) != _storage(x))
    replicate = sum(nbytes(r[k]) for r in tensors["replicas"] for k, p in tensors["params"].items()
                    if _storage(r[k]) != _storage(p))
    gather = nbytes(out) if all(_storage(out) != _storage(o) for o in tensors["outputs"]) else 0
    return {"scatter": scatter, "replicate": replicate, "gather": gather}


def optimizer_state_bytes(opt: torch.optim.Optimizer) -> int:
    """Bytes of the tensors an optimizer keeps (Adam: ``exp_avg``, ``exp_avg_sq``, ``step``), counted (02)."""
    return sum(v.numel() * v.element_size() for st in opt.state.values() for v in st.values()
               if isinstance(v, torch.Tensor))


@contextlib.contextmanager
def _full_float32():
    """Plain float32 on GPUs for the comparison: cuDNN convolutions use TF32 by default on Ampere and later."""
    if not torch.cuda.is_available():
        yield
        return
    matmul = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        cudnn = torch.backends.cudnn
        with cudnn.flags(enabled=cudnn.enabled, benchmark=cudnn.benchmark, deterministic=cudnn.deterministic,
                         allow_tf32=False):
            yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = matmul


GRAD_TOLERANCE = 1e-6  # chosen by hand, not derived: far above float32 rounding seen so far. With TF32 off an H100 gave 9e-9 (the CPU: 6e-9); with cuDNN's default TF32
# convolutions the same GPU step was 8.5e-7 from a CPU reference, too close to call (2026-11-26)


def run_four_steps(batch: int = 256, seed: int = 0, device_ids: list[int] | None = None) -> dict:
    """One DataParallel step opened into its four steps, checked against one device on the whole batch (02).

    Compares the gradients and the update one SGD step makes from them; counts Adam's state on the
    output device. With ≥ 2 GPUs (or ``device_ids`` given) it runs ``torch.nn.parallel``'s steps
    in full float32 (TF32 off) against the whole batch on ``cuda:0``; else the CPU simulation.
    """
    x, y = digits_batch(batch)
    torch.manual_seed(seed)
    model = DigitsCNN()
    if device_ids is None:
        device_ids = list(range(gpu_count())) if gpu_count() >= 2 else []
    dev = f"cuda:{device_ids[0]}" if device_ids else "cpu"
    model = model.to(dev)
    x, y = x.to(dev), y.to(dev)
    reference = copy.deepcopy(model)
    with _full_float32():
        nn.functional.cross_entropy(reference(x), y).backward()
        reference.cpu()  # out of the way: the GPU peaks below are DataParallel's alone
        if device_ids:
            res = four_steps_gpu(model, x, y, device_ids, record=timing)
        else:
            res = four_steps_cpu(model, x, y, n=2, record_backward_threads=True)
    res["grad_max_abs_diff"] = max_abs_diff((p.grad for p in model.parameters()), (p.grad for p in reference.parameters()))
    res["grad_tolerance"] = GRAD_TOLERANCE
    lr = 0.1
    for m in (model, reference):  # one plain SGD step each: the update is lr × gradient
        torch.optim.SGD(m.parameters(), lr=lr).step()
    res["update_max_abs_diff"] = max_abs_diff(model.parameters(), reference.parameters())
    largest = max(p.detach().abs().max().item() for p in reference.parameters())
    res["lr"] = lr
    res["update_tolerance"] = lr * res["grad_tolerance"] + largest * torch.finfo(torch.float32).eps  # + 2⁻²³ × the largest weight: 1 to 2 float32 ulps of it
    adam = torch.optim.Adam(model.parameters())
    adam.step()  # Adam makes its state on the first step, where the parameters (the output device) are
    res["optimizer_bytes"] = optimizer_state_bytes(adam)
    if device_ids:
        res["peak_bytes"] = {f"cuda:{d}": torch.cuda.max_memory_allocated(d) for d in device_ids}
        res["output_device_share"] = res["peak_bytes"][dev] / sum(res["peak_bytes"].values())
    else:
        t = res.pop("tensors")
        res["copied_bytes"] = copied_bytes(t)
        res["accounting"] = output_device_accounting(model, x, t["out"], 2, res["optimizer_bytes"])
        res["output_device_share"] = res["accounting"]["output_device_share"]
        res["main_thread"] = threading.get_ident()
    res.pop("tensors", None)
    return res


def batchnorm_gradient_gap(batch: int = 64, n: int = 2, seed: int = 0, with_scale: bool = False) -> float | tuple[float, float]:
    """Largest gradient difference between the four steps and one device when the model has BatchNorm (02).

    Each replica normalises its own chunk with that chunk's mean and variance, so the model
    computes a different function than on the whole batch. ``with_scale``: return
    ``(difference, largest |single-device gradient entry|)`` to give the difference its scale.
    """
    x, y = digits_batch(batch)
    x = x.flatten(1)
    torch.manual_seed(seed)
    model = nn.Sequential(nn.Linear(x.shape[1], 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    reference = copy.deepcopy(model)
    nn.functional.cross_entropy(reference(x), y).backward()
    four_steps_cpu(model, x, y, n=n)
    gap = max_abs_diff((p.grad for p in model.parameters()), (p.grad for p in reference.parameters()))
    return (gap, max(p.grad.abs().max().item() for p in reference.parameters())) if with_scale else gap

"""Which hardware is this? Device discovery that never crashes, and the one device rule (00 onwards).

Every figure in the course is labelled with :func:`hardware_label`, so that a number always says
what produced it.
"""
from __future__ import annotations

import os
import platform
from dataclasses import dataclass

import torch

from .cpu import cores_text, cpu_model, memory_gb, physical_cores, usable_cpus  # noqa: F401 (re-exported)
from .i18n import tr


@dataclass
class DeviceInfo:
    """One row of the device table (00)."""

    name: str          # torch device string: "cpu", "cuda:0", "mps"
    kind: str          # "CPU", "GPU" or "MPS"
    model: str         # e.g. "NVIDIA T4" or the CPU model
    memory_total_gb: float | None
    memory_used_gb: float | None
    utilization_pct: float | None
    source: str        # where the numbers came from: "NVML", "GPUtil", "torch", "os"


def _cpu_row() -> DeviceInfo:
    """The CPU row: psutil's ``virtual_memory()`` total, and total − available as "used" (00)."""
    total, used = memory_gb()
    return DeviceInfo("cpu", "CPU", f"{cpu_model()} ({cores_text()})",
                      None if total is None else round(total, 1),
                      None if used is None else round(used, 1), None, "os")


def nvml_gpus() -> list[dict]:
    """GPUs as NVML (nvidia-ml-py) sees them; ``[]`` with no driver (06_oom_troubleshooting).

    Without an NVIDIA driver ``pynvml.nvmlInit()`` raises ``NVMLError_LibraryNotFound``:
    that is a normal answer on a laptop, not an error, and becomes an empty list here.
    """
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:  # NVMLError_LibraryNotFound, NVMLError_DriverNotLoaded, ...
        return []
    try:
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            util = pynvml.nvmlDeviceGetUtilizationRates(h)
            name, uuid = pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetUUID(h)
            out.append({"index": i, "name": name.decode() if isinstance(name, bytes) else name,
                        "uuid": uuid.decode() if isinstance(uuid, bytes) else uuid,
                        "memory_total_gb": mem.total / 1e9, "memory_used_gb": mem.used / 1e9,
                        "utilization_pct": float(util.gpu)})
        return out
    except pynvml.NVMLError:
        return []
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def gputil_gpus() -> list[dict]:
    """GPUs as GPUtil sees them (it calls ``nvidia-smi``); ``[]`` when there is none (00)."""
    try:
        import GPUtil

        gpus = GPUtil.getGPUs()
    except Exception:  # GPUtil returns [] without nvidia-smi; be safe against odd outputs too
        return []
    mib = 2**20 / 1e9   # nvidia-smi counts MiB; the table says GB (1e9 bytes), like NVML's rows
    return [{"index": g.id, "name": g.name, "uuid": g.uuid, "memory_total_gb": g.memoryTotal * mib,
             "memory_used_gb": g.memoryUsed * mib, "utilization_pct": 100.0 * g.load} for g in gpus]


def gputil_answer() -> str:
    """What GPUtil answered, in words: its GPU count, or that it cannot be imported and why (00). GPUtil imports
    ``distutils``, which Python 3.12 removed: there ``gputil_gpus()`` is ``[]`` too, but this says why."""
    try:
        import GPUtil  # noqa: F401
    except Exception as e:  # ModuleNotFoundError: No module named 'distutils', or GPUtil not installed
        return f"not importable ({type(e).__name__}: {e})"
    try:
        GPUtil.getGPUs()   # e.g. nvidia-smi present but no driver: its error line fails GPUtil's parsing
    except Exception as e:
        return f"raised {type(e).__name__} (the table counts that as no GPU)"
    return tr("device.gpu_count", "{n} GPU(s)", n=len(gputil_gpus()))


def nvml_answer() -> str:
    """What NVML answered, in words: its GPU count, or the name of the error it raised (00)."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        return type(e).__name__
    try:
        return tr("device.gpu_count", "{n} GPU(s)", n=pynvml.nvmlDeviceGetCount())
    except pynvml.NVMLError as e:
        return type(e).__name__
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _uuid(value) -> str:
    """A GPU's UUID in one spelling: NVML and nvidia-smi write ``GPU-<hex>``, torch the hex alone."""
    text = str(value).lower()
    return text[4:] if text.startswith("gpu-") else text


def gpu_probe() -> tuple[list[dict], str]:
    """Every GPU's name, memory and utilisation, and who said so: NVML, else GPUtil (00, 06).

    ``([], "none")`` without a GPU or a driver: a normal answer, never an error.
    """
    rows = nvml_gpus()
    if rows:
        return rows, "NVML"
    rows = gputil_gpus()
    return (rows, "GPUtil") if rows else ([], "none")


def list_devices() -> list[DeviceInfo]:
    """Every compute device this machine offers, CPU first; never raises (00_setup).

    GPUs come from NVML when it answers, else from GPUtil, else from torch alone. NVML and
    nvidia-smi are not CUDA: they list the machine's GPUs in their own order (NVML's docs recommend
    finding a GPU by PCI id or UUID), whatever ``CUDA_VISIBLE_DEVICES`` says; torch numbers the
    visible ones from 0; so a row is matched to ``cuda:i`` by the GPU's UUID, never by position.
    """
    rows = [_cpu_row()]
    n_cuda = torch.cuda.device_count() if torch.cuda.is_available() else 0
    smi, source = gpu_probe()
    by_uuid = {_uuid(s["uuid"]): s for s in smi if s.get("uuid")}
    for i in range(n_cuda):
        props = torch.cuda.get_device_properties(i)
        s = by_uuid.get(_uuid(getattr(props, "uuid", "")))
        if s is None:
            rows.append(DeviceInfo(f"cuda:{i}", "GPU", props.name, round(props.total_memory / 1e9, 1),
                                   None, None, "torch"))
        else:
            rows.append(DeviceInfo(f"cuda:{i}", "GPU", s["name"], round(s["memory_total_gb"], 1),
                                   round(s["memory_used_gb"], 1), s["utilization_pct"], source))
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        rows.append(DeviceInfo("mps", "MPS", "Apple GPU (Metal)", None, None, None, "torch"))
    return rows


def gpu_count() -> int:
    """Number of CUDA GPUs torch can use (0 on a CPU-only machine) (00 onwards)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def device_table(devices: list[DeviceInfo] | None = None) -> str:
    """The device table as aligned text; its last line says what torch, NVML and GPUtil answered (00)."""
    devices = list_devices() if devices is None else devices

    def fmt(v: float | None, unit: str = "") -> str:
        return "-" if v is None else f"{v:.1f}{unit}"

    head = f"{'device':<8} {'kind':<4} {'memory GB':>10} {'used GB':>8} {'util':>6}  model"
    lines = [head, "-" * len(head)]
    for d in devices:
        lines.append(f"{d.name:<8} {d.kind:<4} {fmt(d.memory_total_gb):>10} {fmt(d.memory_used_gb):>8} "
                     f"{fmt(d.utilization_pct, '%'):>6}  {d.model}")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    built = (tr("device.built_cuda", "built for CUDA {cuda}", cuda=torch.version.cuda) if torch.version.cuda
             else tr("device.built_no_cuda", "built without CUDA"))
    env = "" if visible is None else f", CUDA_VISIBLE_DEVICES={visible!r}"
    said = tr("device.probes", "NVML: {nvml}; GPUtil: {gputil}.", nvml=nvml_answer(), gputil=gputil_answer())
    if not any(d.kind in ("GPU", "MPS") for d in devices):
        lines.append(tr("device.cpu_only", "CPU only for torch: torch.cuda.is_available() is {available} (this torch "
                        "is {built}{env}); {said}", available=torch.cuda.is_available(), built=built, env=env, said=said))
    else:   # the same three answers with a GPU: torch's count, then what each probe said
        mps = tr("device.and_mps", " and MPS") if any(d.kind == "MPS" for d in devices) else ""
        lines.append(tr("device.torch_gpus", "torch: {n} CUDA GPU(s){mps} ({built}{env}); {said}",
                        n=sum(d.kind == "GPU" for d in devices), mps=mps, built=built, env=env, said=said))
    return "\n".join(lines)


def _present() -> list[str]:
    """The device strings torch can use here, from torch alone (no NVML, no nvidia-smi): what an error lists."""
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    return ["cpu"] + [f"cuda:{i}" for i in range(gpu_count())] + (["mps"] if mps else [])


def _best_device() -> torch.device:
    """cuda:0 if there is a GPU, else mps, else cpu: the one default in the course."""
    if gpu_count():
        return torch.device("cuda:0")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def get_device(name: str | None = None) -> torch.device:
    """The device to compute on: ``name`` if given and present, else cuda:0, else mps, else cpu (00_setup).

    This is the one device decision of a notebook (its top cells call it once; everything after
    uses that ``device``). Helpers never call it to place a model: they compute where the model
    is (:func:`model_device`). Raises a ``ValueError`` that says what exists when ``name`` is
    unknown or absent. It asks torch only: the full probe (NVML, GPUtil's ``nvidia-smi``, psutil) is
    :func:`list_devices`, for the device table, never run to decide a device.
    """
    if name is None:
        return _best_device()
    if isinstance(name, torch.device):
        name = str(name)
    if not isinstance(name, str):
        raise TypeError(f"device must be a string such as 'cpu' or 'cuda:0', got {type(name).__name__}")
    present = _present()
    try:
        dev = torch.device(name)
    except RuntimeError as e:
        raise ValueError(tr("device.bad_string", "{name!r} is not a device string; use one of {present}",
                            name=name, present=present)) from e
    if dev.type == "cuda":
        idx = 0 if dev.index is None else dev.index
        if idx >= gpu_count():
            raise ValueError(tr("device.no_such_gpu", "device {name!r} does not exist here ({gpus} CUDA GPU(s)); "
                                "use one of {present}, or get_device() to pick the best one",
                                name=name, gpus=gpu_count(), present=present))
        return torch.device("cuda", idx)
    if dev.type == "mps" and "mps" not in present:
        raise ValueError(tr("device.no_mps", "device 'mps' does not exist here; use one of {present}", present=present))
    if dev.type not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device type {dev.type!r} is not used in this course; use one of {present}")
    return dev


def model_device(model: torch.nn.Module) -> torch.device:
    """Where ``model`` computes: the device of its first parameter (or buffer); the CPU if it has none (00 onwards).

    The course's rule: a helper that receives a model feeds it data on this device, and never
    moves the model somewhere else unless it is told to.
    """
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    return torch.device("cpu")


def hardware_label(device: torch.device | str | None = None, processes: int | None = None,
                   threads: int | None = None) -> str:
    """A short label for any figure: e.g. ``"cpu (Intel Xeon, 2 cores), 2 processes × 1 thread"`` (00 onwards)."""
    dev = get_device(None if device is None else str(device))
    if dev.type == "cuda":
        label = f"{dev} ({torch.cuda.get_device_name(dev)})"
    elif dev.type == "mps":
        label = "mps (Apple GPU)"
    else:
        label = f"cpu ({cpu_model()}, {cores_text()})"
    if processes is not None:
        label += f", {processes} process{'es' if processes != 1 else ''}"
    if threads is not None:
        label += f" × {threads} thread{'s' if threads != 1 else ''}"
    return label


def runtime_summary() -> dict:
    """Python, torch, CUDA and device facts as a dict (00_setup)."""
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda_available": torch.cuda.is_available(),
        "cuda_version": torch.version.cuda,
        "gpus": gpu_count(),
        "mps_available": bool(getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": usable_cpus(),
        "torch_threads": torch.get_num_threads(),
        "in_colab": "google.colab" in __import__("sys").modules,
    }

"""What the CPU is: its model name, its cores, the CPUs this process may use, and memory (00 onwards).

The device table and every CPU figure's label (``helpers.core.device``) take their words from here.
"""
from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (Linux), else what ``platform`` says (00 onwards)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


def physical_cores() -> int:
    """Physical CPU cores (not hyper-threads); ``os.cpu_count()`` when psutil cannot tell (01, 02, 03).

    Colab's two vCPUs can be one core's two hyper-threads: two processes then share one core,
    and a multi-process speed-up cannot appear.
    """
    try:
        import psutil

        n = psutil.cpu_count(logical=False)
    except Exception:  # psutil missing, or /proc unreadable
        n = None
    return n or os.cpu_count() or 1


def cores_text() -> str:
    """The cores in the words every label uses: "2 cores", or "4 logical cores on 2 physical" (00 onwards)."""
    logical, physical = os.cpu_count() or 1, physical_cores()
    return f"{logical} cores" if physical == logical else f"{logical} logical cores on {physical} physical"


def usable_cpus() -> int | None:
    """The logical CPUs this process may run on: ``len(os.sched_getaffinity(0))``, where the OS offers it (Linux);
    else None (00). It can be fewer than ``os.cpu_count()``, which counts the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def memory_gb() -> tuple[float | None, float | None]:
    """psutil's ``virtual_memory()``: (total, total − available) in GB, the whole system's as the OS reports it
    (on Linux /proc/meminfo); (None, None) without psutil (00)."""
    try:
        import psutil

        vm = psutil.virtual_memory()
    except Exception:  # psutil missing or unreadable /proc: still answer
        return None, None
    return vm.total / 1e9, (vm.total - vm.available) / 1e9

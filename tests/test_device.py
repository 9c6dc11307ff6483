"""Device discovery on a machine with no GPU and no NVIDIA driver (helpers.core.device)."""
import pytest
import torch

from helpers.core import device as hd


def test_cpu_only_machine_gives_clean_answer(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(hd, "nvml_gpus", lambda: [])
    monkeypatch.setattr(hd, "gputil_gpus", lambda: [])
    rows = hd.list_devices()
    assert rows[0].kind == "CPU" and rows[0].name == "cpu"
    assert not any(r.kind == "GPU" for r in rows)
    assert "CPU only" in hd.device_table(rows)
    assert hd.get_device().type in ("cpu", "mps")


def test_nvml_without_driver_returns_empty(monkeypatch):
    pynvml = pytest.importorskip("pynvml")

    def no_library():
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", no_library)
    assert hd.nvml_gpus() == []


def test_gputil_without_nvidia_smi_returns_empty(monkeypatch):
    GPUtil = pytest.importorskip("GPUtil")
    monkeypatch.setattr(GPUtil, "getGPUs", lambda: [])
    assert hd.gputil_gpus() == []

    def broken():
        raise OSError("nvidia-smi: not found")

    monkeypatch.setattr(GPUtil, "getGPUs", broken)
    assert hd.gputil_gpus() == []


def test_real_machine_table_never_raises():
    rows = hd.list_devices()
    assert rows[0].kind == "CPU"
    assert sum(r.kind == "GPU" for r in rows) == hd.gpu_count()
    assert hd.device_table().splitlines()[0].startswith("device")


@pytest.mark.parametrize("bad", ["cuda:7", "tpu", "gpu0"])
def test_unknown_or_absent_device_is_refused_clearly(bad):
    with pytest.raises(ValueError, match="use one of"):
        hd.get_device(bad)


def test_device_of_wrong_type_is_refused():
    with pytest.raises(TypeError, match="string such as 'cpu'"):
        hd.get_device(0)


def test_hardware_label_names_processes_and_threads():
    label = hd.hardware_label("cpu", processes=2, threads=1)
    assert label.startswith("cpu (") and "2 processes × 1 thread" in label


def test_a_gpu_row_is_matched_by_uuid_not_by_position(monkeypatch):
    """CUDA_VISIBLE_DEVICES=3 on a 4-GPU machine: torch's cuda:0 is NVML's GPU 3, whose row it must show."""
    smi = [{"index": i, "name": f"GPU model {i}", "uuid": f"GPU-0000000{i}-aaaa", "memory_total_gb": 10.0 * (i + 1),
            "memory_used_gb": float(i), "utilization_pct": 10.0 * i} for i in range(4)]

    class Props:
        name, total_memory, uuid = "GPU model 3 (torch)", 40e9, "0000000" "3-AAAA"

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props())
    monkeypatch.setattr(hd, "gpu_probe", lambda: (smi, "NVML"))
    gpu = [r for r in hd.list_devices() if r.kind == "GPU"]
    assert [(r.name, r.model, r.memory_total_gb, r.utilization_pct) for r in gpu] == [("cuda:0", "GPU model 3", 40.0, 30.0)]
    Props.uuid = "ffffffff-0000"                   # a GPU no probe listed: torch's own numbers, nothing borrowed
    gpu = [r for r in hd.list_devices() if r.kind == "GPU"]
    assert [(r.model, r.source, r.utilization_pct) for r in gpu] == [("GPU model 3 (torch)", "torch", None)]


def test_the_cpu_only_line_reports_what_each_probe_said(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(hd, "nvml_answer", lambda: "1 GPU(s)")            # a driver and a GPU, CPU-only torch
    monkeypatch.setattr(hd, "gputil_gpus", lambda: [{"index": 0}])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    line = hd.device_table([hd.DeviceInfo("cpu", "CPU", "x", None, None, None, "os")]).splitlines()[-1]
    assert "NVML: 1 GPU(s)" in line and "GPUtil: 1 GPU(s)" in line and "CUDA_VISIBLE_DEVICES=''" in line
    assert "no NVIDIA driver" not in line


def test_the_last_line_reports_what_each_source_said_with_a_gpu_too(monkeypatch):
    monkeypatch.setattr(hd, "nvml_answer", lambda: "2 GPU(s)")
    monkeypatch.setattr(hd, "gputil_gpus", lambda: [{"index": 0}, {"index": 1}])
    rows = [hd.DeviceInfo("cpu", "CPU", "x", None, None, None, "os"),
            hd.DeviceInfo("cuda:0", "GPU", "g", 80.0, 1.0, 0.0, "NVML")]
    line = hd.device_table(rows).splitlines()[-1]
    assert line.startswith("torch: 1 CUDA GPU(s)") and "NVML: 2 GPU(s)" in line and "GPUtil: 2 GPU(s)" in line


def test_gputil_that_cannot_be_imported_is_reported_apart_from_no_gpus(monkeypatch):
    """GPUtil imports distutils, gone from Python 3.12: the table must say "not importable", not "0 GPU(s)"."""
    import builtins
    import sys

    real_import = builtins.__import__

    def no_distutils(name, *args, **kwargs):
        if name == "GPUtil":
            raise ModuleNotFoundError("No module named 'distutils'", name="distutils")
        return real_import(name, *args, **kwargs)

    monkeypatch.delitem(sys.modules, "GPUtil", raising=False)
    monkeypatch.setattr(builtins, "__import__", no_distutils)
    assert hd.gputil_gpus() == [] and hd.gputil_answer().startswith("not importable (ModuleNotFoundError")
    line = hd.device_table([hd.DeviceInfo("cpu", "CPU", "x", None, None, None, "os")]).splitlines()[-1]
    assert "GPUtil: not importable" in line and "distutils" in line and "GPUtil: 0 GPU(s)" not in line


def test_gputil_that_imports_reports_its_count(monkeypatch):
    pytest.importorskip("GPUtil")
    import GPUtil

    monkeypatch.setattr(GPUtil, "getGPUs", lambda: [])
    assert hd.gputil_answer() == "0 GPU(s)"

    def no_driver():   # nvidia-smi prints an error line where GPUtil expects numbers
        return int("NVIDIA-SMI has failed")
    monkeypatch.setattr(GPUtil, "getGPUs", no_driver)
    assert hd.gputil_gpus() == [] and hd.gputil_answer() == "raised ValueError (the table counts that as no GPU)"


def test_usable_cpus_follow_the_affinity_not_the_machine(monkeypatch):
    import os

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3}, raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 8)
    assert hd.runtime_summary()["usable_cpus"] == 1 and hd.runtime_summary()["logical_cpus"] == 8
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)     # macOS, Windows: not offered
    assert hd.usable_cpus() is None


def test_the_cpu_row_and_the_figure_labels_count_cores_in_the_same_words():
    row = hd.list_devices()[0]
    assert row.model.endswith(f"({hd.cores_text()})") and hd.cores_text() in hd.hardware_label("cpu")

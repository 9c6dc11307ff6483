"""Device discovery on a machine with no GPU and no NVIDIA driver (helpers.device)."""
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

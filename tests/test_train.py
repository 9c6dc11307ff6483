"""The training loop, models and self-checks (helpers.core.train, helpers.core.models, helpers.core.checks)."""
import pytest
import torch

from helpers import DigitsCNN, MLP, build_model, check, count_parameters, evaluate, make_loaders, seed_everything, train


def test_loss_goes_down_on_digits_in_a_few_epochs():
    seed_everything(0)
    loaders = make_loaders(64)
    model = DigitsCNN()
    before = evaluate(model, loaders["val"])
    hist = train(model, loaders["train"], loaders["val"], epochs=3, lr=3e-3, progress=False)
    assert hist.train_loss[-1] < hist.train_loss[0] * 0.5
    assert hist.val_acc[-1] > 0.85 > before["acc"]


def test_training_is_reproducible():
    runs = []
    for _ in range(2):
        seed_everything(1)
        loaders = make_loaders(64, seed=1)
        runs.append(train(MLP(), loaders["train"], epochs=1, progress=False).train_loss)
    assert runs[0] == runs[1]


def test_parameter_counts():
    counts = count_parameters(DigitsCNN())
    assert counts["total"] == 16 * 9 + 16 + 32 * 16 * 9 + 32 + 512 * 64 + 64 + 64 * 10 + 10
    assert counts["frozen"] == 0
    model = DigitsCNN()
    model.features.requires_grad_(False)                 # freeze the backbone: only the head trains
    frozen = count_parameters(model)
    assert frozen["frozen"] == sum(p.numel() for p in model.features.parameters())
    assert frozen["trainable"] == 64 * 10 + 10 and frozen["total"] == counts["total"]


@pytest.mark.parametrize("kwargs, match", [
    ({"epochs": 0}, "epochs must be a positive int"),
    ({"lr": -1.0}, "learning rate must be a positive, finite number"),
    ({"optimizer": "adamw2"}, "unknown optimizer"),
    ({"device": "cuda:9"}, "does not exist here"),
])
def test_bad_training_arguments(kwargs, match):
    loaders = make_loaders(64)
    with pytest.raises(ValueError, match=match):
        train(MLP(), loaders["train"], progress=False, **kwargs)


def test_fully_frozen_model_is_refused():
    model = MLP().requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        train(model, make_loaders(64)["train"], progress=False)


def test_bad_model_arguments():
    with pytest.raises(ValueError, match="unknown model"):
        build_model("resnet")
    with pytest.raises(ValueError, match="channels must be two positive ints"):
        DigitsCNN(channels=(16,))


def test_seed_must_be_non_negative_int():
    with pytest.raises(ValueError, match="non-negative int"):
        seed_everything(-1)


def test_self_check_correct_wrong_and_missing(capsys):
    from helpers.core.checks import verify
    assert verify("00.batches_of_100", 57)[0] is True  # 1257 training images, 12 whole batches of 100: 57 left over
    ok, msg = verify("00.batches_of_100", 13)
    assert not ok and "Hint" in msg and "57" not in msg
    ok, msg = verify("00.batches_of_100", None)
    assert not ok and "not answered yet" in msg
    assert not verify("00.batches_of_100", "many")[0]
    assert not verify("00.params_hidden128", count_parameters(DigitsCNN(hidden=128))["total"])[0]  # asks without the pool
    assert verify("00.params_hidden128", 32 * 8 * 8 * 128 + 128)[0]
    assert verify("01.bubble_slow_stage", 10 / 18)[0] and not verify("01.bubble_slow_stage", 0.2)[0]
    check("00.batches_of_100", 57)
    assert "correct" in capsys.readouterr().out
    with pytest.raises(KeyError, match="no exercise called"):
        check("99.nothing", 1)


def test_a_training_run_decides_its_device_once_and_never_probes_the_hardware(monkeypatch):
    """train → train_one_epoch → evaluate: one get_device (the run's decision), then the torch.device is passed down;
    nothing on the way (nor hardware_label) runs the device table's probe (NVML, GPUtil's nvidia-smi) (#24)."""
    from helpers import hardware_label
    from helpers.core import device as D
    from helpers.core import train as T

    def probe(*a, **k):
        raise AssertionError("the hardware probe ran while deciding a device")

    for name in ("list_devices", "gpu_probe", "nvml_gpus", "gputil_gpus"):
        monkeypatch.setattr(D, name, probe)
    decided = []
    real = T.get_device
    monkeypatch.setattr(T, "get_device", lambda name=None: decided.append(name) or real(name))
    loaders = make_loaders(256)
    train(MLP(), loaders["train"], loaders["val"], epochs=2, device="cpu", progress=False)
    assert decided == ["cpu"]
    assert evaluate(MLP(), loaders["val"], torch.device("cpu"))["acc"] >= 0 and decided == ["cpu"]
    assert hardware_label().startswith(("cpu", "cuda", "mps")) and D.get_device("cpu") == torch.device("cpu")
    with pytest.raises(ValueError, match=r"'cuda:99' does not exist here .*'cpu'"):
        D.get_device("cuda:99")   # the error still lists what exists, from torch alone

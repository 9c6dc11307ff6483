"""Notebook 06's mixed precision, measured as PyTorch's AMP recipe runs it (helpers.memory.precision,
helpers.memory.instruments.half_vs_autocast): autocast's activations and weight copies, underflow, the GradScaler's
skipped steps."""
import torch

from helpers import memory as M


# --- notebook 06's mixed precision, measured as PyTorch's AMP recipe runs it

def test_autocast_saves_activations_apart_from_weight_copies():
    h = M.half_vs_autocast(blocks=8, width=256, batch=256)
    # the activations autocast saves are .half()'s; the rest are 16-bit copies of 7 weights (the
    # first layer's input needs no gradient, so its weight copy is not saved)
    assert h["autocast_activations"] == h["saved_half"]
    assert h["autocast_weight_casts"] == 7 * h["weight_bytes_fp16"]
    assert h["autocast_activations"] + h["autocast_weight_casts"] == h["saved_autocast"]
    rem = M.remedies(blocks=4, width=64, batch=256)
    assert rem["autocast_activations"] * 2 == rem["plain"]
    assert rem["autocast_activations"] + rem["autocast_weight_casts"] == rem["autocast"]


def test_underflow_with_an_fp32_loss_and_bf16_needs_no_scaler():
    u = M.underflow_demo()
    assert u["fp16_nonzero"] == 0.0 and u["fp32_nonzero"] > 0.5
    assert u["fp16_scaled_nonzero"] == u["bf16_nonzero"] == u["fp32_nonzero"]
    assert u["fp16_scaled_rel_error"] < 1e-2 and u["bf16_rel_error"] < 5e-2


def test_gradscaler_skips_until_the_largest_gradient_fits_fp16():
    import math

    model, x, y = M.big_gradient_problem()
    inf_from = torch.finfo(torch.float16).max + 16  # + half float16's last step: from 65,520 it rounds to inf
    assert torch.tensor(inf_from - 1).half().isfinite() and torch.tensor(inf_from).half().isinf()
    fits = 2 ** (math.ceil(math.log2(inf_from / M.largest_gradient(model, x, y))) - 1)
    opt, scaler = torch.optim.SGD(model.parameters(), lr=1e-4), torch.amp.GradScaler("cpu")
    applied = []
    for _ in range(12):
        scale = scaler.get_scale()
        with torch.autocast("cpu", dtype=torch.float16):
            out = model(x)
            loss = torch.nn.functional.mse_loss(out, y)  # inside autocast, as the recipe: mse_loss runs in fp32
        assert loss.dtype == torch.float32 and math.isfinite(loss.item() * scale)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
        if scaler.get_scale() == scale:
            applied.append(scale)
    assert applied and applied[0] == fits

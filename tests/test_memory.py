"""OOM helpers (helpers.memory): the tracker, the leak, the remedies, the batch search."""
import pytest
import torch
import helpers

from helpers import memory as M


def test_tracker_counts_saved_activations_not_parameters():
    lin = torch.nn.Linear(32, 32)
    x = torch.randn(8, 32)
    with M.SavedTensorTracker() as t:
        out = torch.relu(lin(x))
        held = t.live_bytes()
    assert held == 8 * 32 * 4 * 2  # the input and the ReLU output; the weight is not counted
    del out
    assert t.live_bytes() == 0


def test_leak_grows_exactly_and_fix_is_flat():
    bug, fix = M.leak_curve(False, iterations=5), M.leak_curve(True, iterations=5)
    assert bug["constant_growth"] and bug["bytes_per_iter"] == 150_532
    assert fix["held_bytes"] == [0] * 5


def test_remedies_save_what_they_promise():
    rem = M.remedies(blocks=4, width=64, batch=256)
    assert rem["plain"] == rem["plain_expected"]
    assert rem["no_grad"] == rem["inference_mode"] == 0
    assert rem["autocast"] < rem["plain"] and rem["checkpoint"] == rem["checkpoint_expected"]


def test_autocast_costs_more_than_it_saves_on_tiny_batches():
    # autocast keeps 16-bit copies of the weights: with few rows they outweigh the halved activations
    rem = M.remedies(blocks=4, width=64, batch=8)
    assert rem["autocast"] > rem["plain"]


def test_accumulation_gives_the_big_batch_gradient():
    res = M.accumulation_check(batch=64, steps=4, width=32)
    assert res["max_abs_diff"] < 1e-6 and res["peak_accumulated"] < res["peak_big_batch"]


def test_budget_raises_an_oom_like_error():
    with pytest.raises(M.BudgetExceeded, match="out of memory"):
        with M.SavedTensorTracker(budget_bytes=1000):
            torch.relu(torch.nn.Linear(64, 64)(torch.randn(64, 64)))


def test_find_largest_batch_against_a_known_limit():
    def step(bs):
        if bs > 300:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    res = M.find_largest_batch(step, start=1024)
    assert 296 <= res.batch_size <= 300 and res.tried[0] == (1024, False)


def test_find_largest_batch_does_not_swallow_real_bugs():
    def step(bs):
        raise ValueError("a real bug")

    with pytest.raises(ValueError, match="a real bug"):
        M.find_largest_batch(step)
    with pytest.raises(ValueError, match="positive ints"):
        M.find_largest_batch(step, start=0)
    with pytest.raises(RuntimeError, match="even batch size 1 does not fit"):
        M.find_largest_batch(lambda bs: (_ for _ in ()).throw(M.BudgetExceeded("out of memory")), start=4)


def test_no_gpu_answers_are_clean():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert "no GPU" in M.gpu_status_line(1)
    assert "KeyError" in M.cuda_memory_summary()
    with pytest.raises(RuntimeError, match="needs a GPU"):
        M.cuda_memory()


def test_bad_budget():
    with pytest.raises(ValueError, match="budget_bytes"):
        M.SavedTensorTracker(budget_bytes=-5)


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


def test_leak_breakdown_sums_to_the_measured_leak():
    b = M.leak_breakdown()
    assert b["total"] == M.leak_curve(False, iterations=3)["bytes_per_iter"]
    assert b["rounded"] % 512 == 0 and b["rounded"] >= b["total"]


def test_recorded_gpu_output_is_read_not_typed():
    out = M.recorded_gpu_output("d78593a6")
    assert "after del block" in out and "empty_cache" in out
    assert "H100" in M.recorded_gpu_run()
    with pytest.raises(KeyError, match="record a new GPU run"):
        M.recorded_gpu_output("no-such-cell")


def test_recorded_gpu_intro_says_when_the_recording_ran_other_code(tmp_path):
    import json
    import zipfile
    from pathlib import Path

    nb = json.loads((Path(M.__file__).resolve().parents[2] / "notebooks" / "06_oom_troubleshooting.ipynb").read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    cells["d78593a6"]["source"] = "print('older code')"
    folder = tmp_path / "a" / "b" / "2026-01-01-gpu"
    folder.mkdir(parents=True)
    (folder / "notebooks.log").write_text("GPU run: torch 9, 1 x Some GPU\n")
    with zipfile.ZipFile(folder / "executed_notebooks.zip", "w") as z:
        z.writestr("06_oom_troubleshooting.ipynb", json.dumps(nb))
    # without a README naming the commit, the label says the helpers' commit is unknown
    assert M.recorded_gpu_intro("fa91ff67", folder=folder) == (
        "Recorded on a GPU (torch 9, a course commit the recording does not name; same cell code)")  # "1 x Some GPU": no model number
    older = M.recorded_gpu_intro("d78593a6", folder=folder)
    assert "; an earlier version of this cell, its code in" in older and older.endswith(")")
    assert "2026-01-01-gpu/executed_notebooks.zip" in older                # where that code can be read
    assert "Some GPU" in M.recorded_gpu_intro("d78593a6", folder=folder, details=True)   # the full name, once
    # only the cell's code is compared, not the helpers it calls: the label names the commit whose helpers ran
    (folder / "README.md").write_text("# A run\n\n`tests/gpu/run.sh` on one GPU, from main at abc1234, run as two commands\n")
    assert M.recorded_gpu_commit(folder) == "abc1234"
    assert M.recorded_gpu_intro("fa91ff67", folder=folder).endswith("(torch 9, course commit abc1234; same cell code)")
    assert "course commit abc1234; an earlier version" in M.recorded_gpu_intro("d78593a6", folder=folder)
    assert M.recorded_gpu_intro("fa91ff67", folder=folder).startswith("Recorded on a GPU (")


def test_recorded_gpu_commit_is_read_from_the_recordings_readme():
    assert M.recorded_gpu_commit() == "437db3b"   # "from main at 437db3b" in its README.md
    assert M.recorded_gpu_intro("302c14df").startswith("Recorded on an H100 (torch 2.11.0+cu130, course commit 437db3b; ")
    first = M.recorded_gpu_intro("00c6803b", details=True)   # the detail, once, in the notebook's first recorded cell
    assert "1 × NVIDIA H100 80GB HBM3" in first and "tests/gpu/recorded/2026-11-27-h100" in first
    assert first.splitlines()[-1] == M.recorded_gpu_intro("00c6803b")


def test_recorded_gpu_intro_tells_no_gpu_lines_from_gpu_code(tmp_path):
    # only the else of `if torch.cuda.is_available()` differs: the GPU ran the code shown; a change
    # in the GPU branch, or outside it, is an earlier version
    import json
    import zipfile
    from pathlib import Path

    nb = json.loads((Path(M.__file__).resolve().parents[2] / "notebooks" / "06_oom_troubleshooting.ipynb").read_text())
    cells = {c["id"]: c for c in nb["cells"]}
    now = "".join(cells["c67d3342"]["source"])
    assert "if torch.cuda.is_available():" in now and "then = step_model_at(commit) if commit else None" in now
    cells["c67d3342"]["source"] = now.replace("then = step_model_at(commit) if commit else None", "then = None")
    assert cells["c67d3342"]["source"] != now
    gpu_changed = "".join(cells["d78593a6"]["source"]).replace('show_memory("start")', 'show_memory("begin")')
    assert gpu_changed != "".join(cells["d78593a6"]["source"])
    cells["d78593a6"]["source"] = gpu_changed
    folder = tmp_path / "a" / "b" / "2026-01-01-gpu"
    folder.mkdir(parents=True)
    (folder / "notebooks.log").write_text("GPU run: torch 9, 1 x Some GPU\n")
    with zipfile.ZipFile(folder / "executed_notebooks.zip", "w") as z:
        z.writestr("06_oom_troubleshooting.ipynb", json.dumps(nb))
    same_gpu = M.recorded_gpu_intro("c67d3342", folder=folder)
    assert same_gpu.endswith("; same cell code on a GPU)")
    assert "earlier version" not in same_gpu
    assert "an earlier version of this cell" in M.recorded_gpu_intro("d78593a6", folder=folder)
    assert M.gpu_path("if torch.cuda.is_available():\n    a()\nelse:\n    b()") == M.gpu_path("a()  # note")
    assert M.gpu_path("if not torch.cuda.is_available():\n    b()\nc()") == M.gpu_path("c()")
    assert M.gpu_path("if torch.cuda.is_available():\n    a()") != M.gpu_path("if torch.cuda.is_available():\n    a2()")


def test_half_weights_are_measured():
    h = M.half_vs_autocast(blocks=3, width=8, batch=4)
    # 3 blocks of 8 × 8 weights and 8 biases: 216 numbers, 4 B each in float32 and 2 B after .half()
    assert (h["params_fp32"], h["params_half"]) == (216 * 4, 216 * 2)


def test_find_largest_batch_exact_with_tolerance_one():
    def step(bs):
        if bs > 1562:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")

    assert M.find_largest_batch(step, start=4096, tolerance=1).batch_size == 1562


def test_find_largest_batch_from_a_start_that_is_no_power_of_two(monkeypatch):
    # each failed size is followed by one gc.collect (counted, not run: a full collection of the test
    # process per failure made this test 36 s long)
    from helpers.memory import recipe
    collects = []
    monkeypatch.setattr(recipe, "gc", type("GC", (), {"collect": staticmethod(lambda: collects.append(1))}))
    # 4097 fails, 2048 fits: the limit lies below 4097, not below 2 × 2048 = 4096, so 4096 must be tried
    # (bisecting between 2048 and 4096 stopped at 4095, below the true limit)
    res = M.find_largest_batch(_limit_step(4096), start=4097, tolerance=1)
    assert res.batch_size == 4096 and (4096, True) in res.tried and (4097, False) in res.tried
    assert len(collects) == sum(not ok for _, ok in res.tried) >= 1
    for limit in (1, 2, 3, 5, 100, 1000, 2047, 3000, 5000):  # every limit below the start, from odd starts
        for start in (limit + 1, 2 * limit + 1, 3 * limit + 2):
            got = M.find_largest_batch(_limit_step(limit), start=start, tolerance=1).batch_size
            assert got == limit, (limit, start, got)


def _limit_step(limit):
    def step(bs):
        if bs > limit:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (simulated)")
    return step


# --- exercise 06.mean_loss: wrong answers are refused

def _sum_losses(model, batches, reduction="sum"):
    return [torch.nn.functional.cross_entropy(model(x), y, reduction=reduction) for x, y in batches]


def _right(model, batches):
    with torch.no_grad():
        return sum(loss.item() for loss in _sum_losses(model, batches)) / sum(len(y) for _, y in batches)


def _mean_of_batch_means(model, batches):
    with torch.no_grad():
        return sum(loss.item() for loss in _sum_losses(model, batches, "mean")) / len(batches)


def _tensor_total(model, batches):
    total = 0
    for x, y in batches:
        total = total + torch.nn.functional.cross_entropy(model(x), y, reduction="sum")
    return (total / sum(len(y) for _, y in batches)).item()


_KEPT = []


def _keeps_the_last_loss(model, batches):
    value = _right(model, batches)
    x, y = batches[-1]
    _KEPT.append(torch.nn.functional.cross_entropy(model(x), y))  # a graph kept after returning
    return value


def _first_case_hard_coded(model, batches, _value=[]):
    if not _value:
        _value.append(_right(model, batches))
    return _value[0]


@pytest.mark.parametrize("wrong, why", [
    (_mean_of_batch_means, "mean of the batches' means"),
    (_tensor_total, "batches' worth of saved tensors"),
    (_keeps_the_last_loss, "still held"),
    (_first_case_hard_coded, "not the mean loss over all samples"),
    (lambda m, b: _right(m, b) * sum(len(y) for _, y in b), "not the mean loss over all samples"),
    (lambda m, b: torch.tensor(_right(m, b)), "returned a tensor"),
    (lambda m, b: helpers.evaluate(m, b)["loss"], "calls the course's evaluate()"),  # the reference, wrapped
])
def test_mean_loss_check_refuses_wrong_answers(wrong, why):
    from helpers.core.checks import verify

    ok, msg = verify("06.mean_loss", wrong)
    assert not ok and why in msg
    _KEPT.clear()


@pytest.mark.parametrize("case", range(4))
def test_mean_loss_check_catches_kept_graphs_in_every_case(case, monkeypatch):
    # every case alone refuses a tensor total (all graphs alive), not only the one with most batches
    from helpers.core.checks import verify
    from helpers.memory import lesson

    sizes = lesson.MEAN_LOSS_CASES[case]
    assert len(sizes) > 1
    monkeypatch.setattr(lesson, "MEAN_LOSS_CASES", (sizes,))
    ok, msg = verify("06.mean_loss", _tensor_total)
    assert not ok and "batches' worth of saved tensors" in msg
    assert verify("06.mean_loss", _right)[0]
    if len(set(sizes)) > 1:
        assert not verify("06.mean_loss", _mean_of_batch_means)[0]


def test_mean_loss_check_accepts_right_answers():
    from helpers.core.checks import verify

    def per_batch_weighted(model, batches):
        total, n = 0.0, 0
        for x, y in batches:
            total += torch.nn.functional.cross_entropy(model(x), y).item() * len(y)  # graph freed each batch
            n += len(y)
        return total / n

    assert verify("06.mean_loss", _right)[0] and verify("06.mean_loss", per_batch_weighted)[0]


def test_leak_exercise_refuses_each_plausible_wrong_method():
    # exercise 1: section 3's loop with hidden width 32, the largest batch whose leak stays within
    # 5,600,000 B; the budget is chosen so that each classic shortcut gives another batch
    from helpers.core.checks import verify
    from helpers.memory.lesson import LEAK_BUDGET, LEAK_HIDDEN, _leak_of

    budget, hidden = LEAK_BUDGET, LEAK_HIDDEN
    per_sample = 64 * 4 + 2 * hidden * 4 + 10 * 4 + 8        # input, two ReLU outputs, log-softmax, int64 target
    right = (budget - 4) // per_sample                       # 4 B: nll_loss's total_weight, whatever the batch
    assert verify("06.leak_largest_batch", right)[0]
    assert _leak_of(right) <= budget < _leak_of(right + 1)   # measured, not only from the shapes
    parts = lambda b: M.leak_breakdown(batch=b, hidden=hidden)  # noqa: E731
    assert parts(right)["total"] <= budget < parts(right + 1)["total"]
    leak64 = _leak_of(64)
    wrong = {
        "the 4 B constant ignored": budget // per_sample,
        "batch 64's measured leak scaled": budget * 64 // leak64,
        "each tensor rounded up to 512 B (a GPU's count)": max(b for b in range(right - 200, right + 2)
                                                               if parts(b)["rounded"] <= budget),
        "rounded up instead of down": -(-(budget - 4) // per_sample),
        "targets forgotten": (budget - 4) // (per_sample - 8),
        "targets as 4-byte ints": (budget - 4) // (per_sample - 4),
        "hidden width 256 (section 3's)": (budget - 4) // (64 * 4 + 2 * 256 * 4 + 10 * 4 + 8),
        "the leak of batch 64 in bytes": leak64,
        "5.6 MB read as 5.6 MiB": int((5.6 * 2**20 - 4) // per_sample),
    }
    for why, value in wrong.items():
        assert value != right, why
        assert not verify("06.leak_largest_batch", value)[0], why


def test_autocast_copies_exercise_counts_only_blocks_whose_input_needs_a_gradient():
    # exercise 3: deep_mlp(6, 384), first 3 blocks frozen, input without a gradient: block 4's input
    # (block 3's output) needs no gradient either, so only blocks 5 and 6 keep a 16-bit weight copy
    from helpers.core.checks import verify
    from helpers.memory.lesson import AUTOCAST_FROZEN

    copy = 384 * 384 * 2
    right = (6 - AUTOCAST_FROZEN - 1) * copy
    assert AUTOCAST_FROZEN == 3 and verify("06.autocast_copies", right)[0]
    wrong = {
        "autocast saves a copy of every weight": 6 * copy,
        "every block but the first (blocks - 1)": (6 - 1) * copy,
        "every trainable block": (6 - AUTOCAST_FROZEN) * copy,
        "the frozen blocks": AUTOCAST_FROZEN * copy,
        "float32 bytes": (6 - AUTOCAST_FROZEN - 1) * 384 * 384 * 4,
        "weights and biases": (6 - AUTOCAST_FROZEN - 1) * (384 * 384 + 384) * 2,
        "one block's copy": copy,
        "the lesson helper's answer (nothing frozen)": M.half_vs_autocast(blocks=6, width=384, batch=32)["autocast_weight_casts"],
        "copies and activations (nothing frozen)": M.half_vs_autocast(blocks=6, width=384, batch=32)["saved_autocast"],
        "the old exercise's answer (input requires grad, nothing frozen)": 6 * copy,
        "a 1000 x 1000 float16 tensor (an older exercise)": 2_000_000,
    }
    for why, value in wrong.items():
        assert value != right, why
        assert not verify("06.autocast_copies", value)[0], why


def test_step_model_at_reads_the_recorded_commits_default():
    # cell 37 prints the model the recorded GPU run trained, read from its commit (skipped in a shallow clone)
    import subprocess

    commit = M.recorded_gpu_commit()
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"this clone lacks {commit}")
    assert M.step_model_at(commit) == "deep_mlp(blocks=8, width=4096)"
    assert M.step_model_at("0" * 40) is None


def test_checkpoint_exercise_is_measured_and_not_the_formula_for_root_n():
    from helpers.core.checks import verify

    assert verify("06.checkpoint_n64", 4 + 64 // 4)[0]
    for wrong in (2 * 8, 64 + 1, 4, 64 // 4):  # 2√n for √n segments, no checkpointing, inputs only, last segment only
        assert not verify("06.checkpoint_n64", wrong)[0]


# --- what notebook 06 expects of a GPU (tests/gpu/run.sh runs these; skipped without CUDA)



@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_del_and_empty_cache_on_a_gpu():
    start = torch.cuda.memory_allocated()
    x = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")
    reserved = torch.cuda.memory_reserved()
    assert torch.cuda.memory_allocated() - start >= 256 * 2**20
    del x
    assert torch.cuda.memory_allocated() == start and torch.cuda.memory_reserved() == reserved
    torch.cuda.empty_cache()
    assert torch.cuda.memory_reserved() <= reserved - 256 * 2**20


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_leak_on_a_gpu_is_the_breakdown_rounded_to_512_bytes():
    bug = M.leak_curve(False, device="cuda")
    assert bug["cuda_allocated"][-1] - bug["cuda_allocated"][-2] == M.leak_breakdown()["rounded"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (run tests/gpu/run.sh there)")
def test_autocast_on_a_gpu_saves_half_activations_plus_weight_copies():
    rem = M.remedies(blocks=4, width=64, batch=256, device="cuda")
    assert rem["autocast_activations"] * 2 == rem["plain"] and rem["autocast_weight_casts"] > 0


def test_recorded_memory_rows_are_parsed_from_the_recording():
    rows = M.recorded_memory_rows("d78593a6")
    assert list(rows) == ["start", "after clearing cuBLAS workspaces", "after a 256 MiB tensor", "after del block",
                          "after empty_cache()"]
    (a0, r0), (a1, r1) = rows["start"], rows["after empty_cache()"]
    assert a1 < r1 < r0   # what cell 9's generated sentence says: empty_cache() keeps segments holding live tensors
    assert rows["after del block"] == (rows["after clearing cuBLAS workspaces"][0], rows["after a 256 MiB tensor"][1])
    assert M.recorded_memory_rows("00c6803b") == {}   # a cell without such rows gives none


def test_step_model_reads_the_factories_defaults():
    assert M.step_model(M.training_step_under_budget) == "deep_mlp(blocks=4, width=256)"
    assert M.step_model(M.training_step_on_gpu) == "deep_mlp(blocks=8, width=4096)"
    assert M.step_model(lambda width=7, blocks=3: None) == "deep_mlp(blocks=3, width=7)"


def test_gpu_status_line_prints_gib(monkeypatch):
    from helpers.memory import instruments
    row = {"index": 0, "utilization_pct": 5.0, "memory_used_gb": 2**30 / 1e9, "memory_total_gb": 80 * 2**30 / 1e9}
    monkeypatch.setattr(instruments, "gpu_status", lambda: [row])
    assert M.gpu_status_line(3) == "step 3: GPU 0 5% GPU-Util, 1.00/80.0 GiB used"


def test_the_batch_search_cell_still_runs_the_recorded_gpu_code():
    # cell 37's GPU path must stay the recorded one, or its recorded line is an earlier version's
    intro = M.recorded_gpu_intro("c67d3342")
    assert "; same cell code" in intro and "earlier version" not in intro and "course commit" in intro


def test_held_bytes_counts_what_is_made_until_it_is_freed():
    w = torch.ones(1000)                        # made before: not counted, nor its views
    with M.HeldBytes() as held:
        a = torch.empty(1000)                   # 4,000 B
        b = a.exp_()                            # in place: a's storage again
        v = w.view(10, 100)                     # a view of a tensor made before
        c = torch.ones(500, dtype=torch.float16)  # 1,000 B
        assert held.now == 5000
        del a, b, c
        assert held.now == 0 and held.peak == 5000
    del v


def test_step_peaks_agree_with_the_saved_tensor_tracker():
    rem, pk = M.remedies(blocks=4, width=32, batch=16), M.step_peaks(blocks=4, width=32, batch=16)
    assert pk["plain"]["after_forward"] == rem["plain"] and pk["checkpoint"]["after_forward"] == rem["checkpoint"]
    assert pk["autocast"]["after_forward"] == rem["autocast"] + pk["input_bytes"]
    for k in ("plain", "autocast", "checkpoint"):
        assert pk[k]["left"] == pk["grad_bytes"] == 4 * (32 * 32 + 32) * 4   # the float32 gradients stay
        assert pk[k]["peak"] > pk[k]["forward_peak"] >= pk[k]["after_forward"]  # the backward needs more


def test_only_small_segments_are_called_2_mib_segments():
    # 4 MiB reserved can only be two 2 MiB small-pool segments; 20 MiB may be one large segment (a
    # request between 1 and 10 MiB), and 12 MiB one of a 12 MiB request: even alone is not enough
    assert M.small_segments_only(4.0) and M.small_segments_only(2.0) and M.small_segments_only(8.0)
    for mib in (20.0, 12.0, 10.0, 40.0, 3.0, 0.0, 4.5):
        assert not M.small_segments_only(mib), mib

"""Notebook 08's DDP rebuilt by hand (helpers/collectives/scratch_ddp.py): buckets as DDP assigns them, the same step
as DDP, and the cases where it used to differ."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.collectives import make_buckets

import torch.distributed as dist  # noqa: E402,I001  (the skeleton below uses it as the notebook's file does)


def test_buckets_hold_every_parameter_once_last_layer_first():
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    params = list(model.parameters())
    buckets = make_buckets(params, bucket_bytes=2**18)
    flat = [p for b in buckets for p in b]
    assert len(flat) == len(params) and {id(p) for p in flat} == {id(p) for p in params}
    assert flat[0] is params[-1]                      # backward produces the last layer's gradients first
    assert len(buckets) > 1
    assert all(sum(p.numel() * 4 for p in b[:-1]) < 2**18 for b in buckets)  # a bucket closes once it is full


def test_make_buckets_closes_where_ddp_s_bucket_assignment_does_and_ddp_splits_by_dtype():
    # make_buckets' docstring: DDP closes a bucket the same way, with one bucket list per dtype and device
    sizes = [100, 50, 200, 25, 300, 75]
    params = [nn.Parameter(torch.zeros(n)) for n in sizes]
    for limit in (1, 400, 600, 801, 10**6):
        ours = [[id(p) for p in b] for b in make_buckets(params, limit)]
        # DDP's function in the order make_buckets walks (last layer first), one limit for every bucket
        rev = list(reversed(params))
        theirs = [[id(rev[i]) for i in b] for b in dist._compute_bucket_assignment_by_size(rev, [limit])[0]]
        assert ours == theirs, limit
    mixed = [torch.zeros(100), torch.zeros(100, dtype=torch.float64), torch.zeros(100), torch.zeros(100, dtype=torch.float64)]
    assert dist._compute_bucket_assignment_by_size(mixed, [10**6])[0] == [[0, 2], [1, 3]]


def test_scratch_ddp_equals_ddp():
    from helpers.collectives import run_scratch_ddp
    res = run_scratch_ddp(nprocs=2, hidden=(32,), batch=64, steps=2, timed_steps=1, repeats=1)
    assert set(res["max_abs_diff"]) == {"ddp", "per_parameter", "bucketed", "overlapped"}
    assert max(res["max_abs_diff"].values()) <= 1e-6
    # all-reduces per step: one per parameter (4: two Linear layers), one per bucket (bucket_bytes 1 MiB: all in one),
    # DDP's reducer: one bucket after its rebuild (the model is far below its 1 MiB first bucket)
    assert res["steps"] == 2
    assert res["all_reduces"] == {"per_parameter": 4, "bucketed": 1, "overlapped": 1, "ddp": 1}
    with pytest.raises(ValueError, match="divide evenly"):
        run_scratch_ddp(nprocs=2, batch=63)
    with pytest.raises(ValueError, match="'ddp'"):
        run_scratch_ddp(variants=("bucketed",))
    assert torch.get_num_threads() >= 1


# --- DDP from scratch where it used to differ from DDP: buffers, unused parameters, two backward passes, empty buckets

def ddp_gaps(rank, world_size):
    """In each of 2 ranks: OverlappedDDP and the bucketed all-reduce beside DDP in the cases DDP handles (ranks import it)."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    from helpers.collectives import OverlappedDDP, allreduce_gradients_bucketed

    def bn_model():  # parameters and BatchNorm buffers that differ by rank until someone broadcasts them
        torch.manual_seed(rank)
        m = nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Linear(16, 3))
        m[1].running_mean.fill_(rank + 1.0)
        return m

    g = torch.Generator().manual_seed(100 + rank)
    xs, ys = [torch.randn(6, 8, generator=g) for _ in range(4)], [torch.randint(0, 3, (6,), generator=g) for _ in range(4)]

    def train(net, model, finish, micro):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(2):
            opt.zero_grad()
            for j in range(micro):  # micro > 1: several backward passes before finish(), gradients summed
                nn.functional.cross_entropy(net(xs[micro * step + j]), ys[micro * step + j]).backward()
            finish()
            opt.step()
        return [t.detach().double() for t in [*model.parameters(), *model.buffers()]]

    out = {}
    for micro in (1, 2):
        ref_model = bn_model()
        ref = train(DDP(ref_model), ref_model, lambda: None, micro)
        for bucket_bytes in (0, 2**20):
            model = bn_model()
            wrapped = OverlappedDDP(model, bucket_bytes)
            mine = train(wrapped, model, wrapped.finish, micro)
            out[f"micro{micro}_bytes{bucket_bytes}"] = max(float((a - b).abs().max()) for a, b in zip(mine, ref))

    class WithUnused(nn.Module):
        def __init__(self):
            super().__init__()
            self.used, self.unused = nn.Linear(8, 3), nn.Linear(8, 3)

        def forward(self, x):
            return self.used(x)

    for bucket_bytes in (0, 2**20):
        torch.manual_seed(0)
        wrapped = OverlappedDDP(WithUnused(), bucket_bytes)
        nn.functional.cross_entropy(wrapped(xs[0]), ys[0]).backward()
        try:
            wrapped.finish()
            out[f"unused_{bucket_bytes}"] = None
        except RuntimeError as e:
            out[f"unused_{bucket_bytes}"] = str(e)
    dist.barrier()  # the ranks still agree after the error

    fresh = nn.Linear(4, 2)  # no backward yet: no gradient anywhere, nothing to send
    allreduce_gradients_bucketed(fresh, bucket_bytes=0)
    allreduce_gradients_bucketed(fresh)
    model = bn_model()
    nn.functional.cross_entropy(model(xs[0]), ys[0]).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    for e in expected:
        dist.all_reduce(e)
    allreduce_gradients_bucketed(model, bucket_bytes=0)  # one bucket per parameter
    out["bucketed_0"] = max(float((p.grad - e / world_size).abs().max()) for p, e in zip(model.parameters(), expected))
    return out


@pytest.fixture(scope="module")
def gaps():
    from helpers.launching import launch
    return launch(ddp_gaps, 2, timeout=180, verbose=False)


def test_overlapped_ddp_broadcasts_buffers_and_equals_ddp_with_batchnorm(gaps):
    for r in gaps:  # ranks start from different parameters and BatchNorm statistics, as DDP's do before it wraps
        assert r["micro1_bytes1048576"] <= 1e-6 and r["micro1_bytes0"] <= 1e-6, r


def test_two_backward_passes_before_finish_sum_the_gradients_as_ddp_does(gaps):
    for r in gaps:
        assert r["micro2_bytes1048576"] <= 1e-6 and r["micro2_bytes0"] <= 1e-6, r


def test_a_trainable_parameter_without_gradient_is_refused_on_every_rank(gaps):
    for r in gaps:
        for key in ("unused_0", "unused_1048576"):
            assert r[key] and "unused.weight" in r[key] and "unused.bias" in r[key] and "requires_grad_(False)" in r[key]
            assert "used.weight" not in r[key].replace("unused.weight", "")


def test_empty_buckets_never_happen_and_bucket_bytes_0_is_one_bucket_per_parameter(gaps):
    for r in gaps:
        assert r["bucketed_0"] <= 1e-7
    params = list(nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)).parameters())
    assert make_buckets(params, 0) == [[p] for p in reversed(params)]
    assert make_buckets([], 2**20) == []
    with pytest.raises(ValueError, match="bucket_bytes"):
        make_buckets(params, -1)

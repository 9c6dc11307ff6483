"""Notebook 02's exercises: reduce_gradients accepts the sum and refuses plausible wrong reductions; the byte and
idle-GPU questions."""
import pytest
import torch

from helpers.core.checks import verify


def test_gpus_idle_hint_does_not_name_the_computation():
    from helpers.data_parallel.lesson import EXERCISES
    hint = next(e for e in EXERCISES if e.id == "02.gpus_idle_6_on_4").hint
    assert "6" not in hint and "4" not in hint and "torch.chunk" not in hint
    # fresh read (session 9): the hint points at the method, not at the outcome (that chunks can be fewer)
    assert not any(w in hint for w in ("fewer", "as many", "always", "idle", "empty"))


# --- the exercises: right answers pass, plausible wrong ones are refused -----------------------------------

def _sum_grads(model, replicas):  # added to what .grad holds, as autograd accumulates
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            total = torch.stack(grads).sum(0)
            p.grad = total if p.grad is None else p.grad + total


def _overwrite_the_earlier_grad(model, replicas):  # right sum, but it drops what .grad held before
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            p.grad = torch.stack(grads).sum(0)


def _mean_grads(model, replicas):  # the classic mistake: averaging what DataParallel sums
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            p.grad = torch.stack(grads).mean(0)


def _first_replica_only(model, replicas):
    for p, q in zip(model.parameters(), replicas[0].parameters()):
        if q.grad is not None:
            p.grad = q.grad.clone()


def _all_but_the_last(model, replicas):
    _sum_grads(model, replicas[:-1] if len(replicas) > 1 else replicas)


def _sum_into_the_first_replica(model, replicas):  # changes a replica's gradients
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        if rs[0].grad is not None:
            for q in rs[1:]:
                rs[0].grad += q.grad
            p.grad = rs[0].grad


def _alias_a_replicas_grad(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        if rs[0].grad is not None:
            p.grad = rs[0].grad if len(rs) == 1 else sum(q.grad for q in rs)


def _zeros_for_frozen(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        p.grad = sum((q.grad for q in rs if q.grad is not None), torch.zeros_like(p))


def _all_or_nothing(model, replicas):  # skips a parameter as soon as one replica has no gradient for it
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        if all(q.grad is not None for q in rs):
            total = torch.stack([q.grad for q in rs]).sum(0)
            p.grad = total if p.grad is None else p.grad + total


def _blind_to_none(model, replicas):
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        p.grad = sum(q.grad for q in rs)


def _none_for_frozen(model, replicas):  # "no replica has a gradient" read as "no gradient": drops an earlier .grad
    for p, *rs in zip(model.parameters(), *(r.parameters() for r in replicas)):
        grads = [q.grad for q in rs if q.grad is not None]
        if grads:
            total = torch.stack(grads).sum(0)
            p.grad = total if p.grad is None else p.grad + total
        else:
            p.grad = None


def _skeleton(model, replicas):
    ...


def test_reduce_gradients_accepts_the_sum():
    ok, msg = verify("02.reduce_gradients", _sum_grads)
    assert ok, msg


@pytest.mark.parametrize("wrong", [_mean_grads, _first_replica_only, _all_but_the_last, _sum_into_the_first_replica, _overwrite_the_earlier_grad,
                                   _alias_a_replicas_grad, _zeros_for_frozen, _none_for_frozen, _blind_to_none, _all_or_nothing,
                                   _skeleton],
                         ids=lambda f: f.__name__.strip("_"))
def test_reduce_gradients_refuses_wrong_answers(wrong):
    ok, msg = verify("02.reduce_gradients", wrong)
    assert not ok and "Hint" in msg


def test_gathered_bytes_needs_both_the_own_chunk_and_the_gather():
    gpus, batch, classes = 4, 1024, 50_000
    chunk = len(torch.empty(batch, 0).chunk(gpus)[0])
    own, gathered = chunk * classes * 4, batch * classes * 4
    assert verify("02.gathered_bytes", [own + gathered, own])[0]
    for wrong in ([gathered, own], gathered, own + gathered, [own, own + gathered], [own + gathered, 0],
                  [gathered + own, gathered]):
        assert not verify("02.gathered_bytes", wrong)[0], wrong


def test_gpus_idle_follows_torch_chunk():
    idle = 4 - len(torch.arange(6).chunk(4))
    assert verify("02.gpus_idle_6_on_4", idle)[0]
    for wrong in (0, 2, 6 % 4 + 1, 4):  # 6 ≥ 4 so "none"; 6 mod 4; …; "all"
        if wrong != idle:
            assert not verify("02.gpus_idle_6_on_4", wrong)[0], wrong

"""Notebook 00 (setup): readings of its measurements, generated from the numbers: the steal time that PSI does not
count (section 3), and whether a rise in validation loss stands above its noise (section 5)."""
from __future__ import annotations


def cpu_steal_total(path: str = "/proc/stat") -> int | None:
    """The "cpu" line's steal column of ``/proc/stat`` (https://man7.org/linux/man-pages/man5/proc_stat.5.html):
    ticks of ``USER_HZ`` that this machine's CPUs, as a virtual machine's, spent in other operating systems, summed
    over its CPUs, since boot; None where the file or the column is missing (not Linux, a kernel before 2.6.11) (00).
    PSI does not count this time: its CPU "some" is this kernel's runnable tasks beyond those on a CPU (psi.c)."""
    try:
        with open(path) as f:
            for line in f:
                fields = line.split()
                if fields and fields[0] == "cpu":
                    return int(fields[8])   # user nice system idle iowait irq softirq steal
    except (OSError, IndexError, ValueError):
        return None
    return None


def sample_losses(model, loader) -> list[float]:
    """Each sample's cross-entropy loss under ``model`` in evaluation mode, in the loader's order, without a graph;
    the model goes back to the mode it came in (00: the noise of a rise in validation loss)."""
    import torch

    from ..core.device import model_device

    was, device = model.training, model_device(model)
    model.eval()
    out: list[float] = []
    with torch.no_grad():
        for x, y in loader:
            out += torch.nn.functional.cross_entropy(model(x.to(device)), y.to(device), reduction="none").tolist()
    model.train(was)
    return out


def overfitting_verdict(train_loss: list[float], val_loss: list[float], at_lowest: list[float],
                        at_last: list[float], spread: float = 2.0) -> str:
    """Section 5's reading of a rise in validation loss after its lowest epoch, generated from the numbers (00).

    ``at_lowest`` and ``at_last``: each validation sample's loss under the weights of the lowest-validation epoch
    and of the last. The rise (their mean difference) is set against its standard error over the samples (the
    standard deviation of the per-sample differences / sqrt(n): paired, the same samples scored twice). Only a rise
    above ``spread`` standard errors, with the training loss lower at the last epoch than at the lowest, is called
    consistent with the start of overfitting; a smaller rise is said to be within noise."""
    import math
    import statistics

    best, last = min(range(len(val_loss)), key=val_loss.__getitem__), len(val_loss) - 1
    if best == last:
        return f"the validation loss is lowest at the last epoch ({last + 1}): no rise to judge"
    if len(at_lowest) != len(at_last) or len(at_last) < 2:
        raise ValueError("at_lowest and at_last must hold the losses of the same samples (two or more)")
    diffs = [b - a for a, b in zip(at_lowest, at_last)]
    rise, se = statistics.fmean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs))
    head = (f"from epoch {best + 1} to {last + 1} the validation loss rose by {rise:.3g}; the standard error of that "
            f"rise over the {len(diffs)} validation samples (each one's loss at epoch {last + 1} minus at epoch "
            f"{best + 1}) is {se:.2g}" + (f", so the rise is {rise / se:.1f} standard errors" if se > 0 else ""))
    if rise <= spread * se:
        return (f"{head}: within {spread:g} standard errors, a rise that the choice of validation samples alone "
                f"could make, so this run shows no overfitting that its validation set can tell from noise")
    if train_loss[last] < train_loss[best]:
        return (f"{head}: more than {spread:g}, while the training loss fell ({train_loss[best]:.3g} at epoch "
                f"{best + 1}, {train_loss[last]:.3g} at the last): consistent with the start of overfitting, a gap "
                f"that grows (Deep Learning, §5.2: https://www.deeplearningbook.org/contents/ml.html). This standard "
                f"error counts only which samples were drawn for validation, not how another training run would "
                f"bounce, and the lowest of {len(val_loss)} epochs is low partly by chance")
    return (f"{head}: more than {spread:g}, but the training loss did not fall after epoch {best + 1}, so this is not "
            f"the pattern of overfitting (training loss falling while validation loss rises)")

"""Notebook 00 (setup): readings of its measurements, generated from the numbers: the steal time that PSI does not
count, the OpenMP library loaded and what libgomp read when it loaded (section 3), and whether a rise in validation
loss stands above its noise (section 5)."""
from __future__ import annotations

from ..core.i18n import tr


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
                        at_last: list[float], spread: float = 2.0, fit: tuple[float, float] | None = None,
                        val_acc: float | None = None) -> str:
    """Section 5's reading of a rise in validation loss after its lowest epoch, generated from the numbers (00).

    ``at_lowest`` and ``at_last``: each validation sample's loss under the weights of the lowest-validation epoch
    and of the last. The rise (their mean difference) is set against its standard error over the samples (the
    standard deviation of the per-sample differences / sqrt(n): paired, the same samples scored twice). Only a rise
    above ``spread`` standard errors, with the training loss lower at the last epoch than at the lowest, is called
    consistent with the start of overfitting; a smaller rise is said to be within noise. With ``fit`` (the final
    weights' loss and accuracy on the training set) and ``val_acc`` (the last epoch's), the gap itself is said too:
    Deep Learning §5.2 calls too large a gap between training and test error overfitting, with no threshold: the gaps
    are printed and the judgement left to the reader."""
    best, last = min(range(len(val_loss)), key=val_loss.__getitem__), len(val_loss) - 1
    if best == last:
        verdict = tr("setup.lowest_last", "the validation loss is lowest at the last epoch ({last}): no rise to judge",
                     last=last + 1)
    else:
        verdict = _rise_verdict(train_loss, val_loss, at_lowest, at_last, spread, best, last)
    if fit is None or val_acc is None:
        return verdict
    return tr("setup.gap", "{verdict}. The gap itself: Deep Learning, §5.2 (https://www.deeplearningbook.org/contents/"
              "ml.html) calls too large a gap between training and test error overfitting, without saying how large; "
              "here it is {loss_gap} in loss ({fit_loss} on the training set, {val_loss} on validation) and {acc_gap} in "
              "accuracy ({fit_acc} on the training set, {val_acc} on validation)", verdict=verdict,
              loss_gap=f"{val_loss[last] - fit[0]:.3g}", fit_loss=f"{fit[0]:.3g}", val_loss=f"{val_loss[last]:.3g}",
              acc_gap=f"{fit[1] - val_acc:.3f}", fit_acc=f"{fit[1]:.3f}", val_acc=f"{val_acc:.3f}")


def _rise_verdict(train_loss, val_loss, at_lowest, at_last, spread, best, last) -> str:
    """:func:`overfitting_verdict`'s reading of the rise after the lowest epoch, without the gap (00)."""
    import math
    import statistics

    if len(at_lowest) != len(at_last) or len(at_last) < 2:
        raise ValueError("at_lowest and at_last must hold the losses of the same samples (two or more)")
    diffs = [b - a for a, b in zip(at_lowest, at_last)]
    rise, se = statistics.fmean(diffs), statistics.stdev(diffs) / math.sqrt(len(diffs))
    said = dict(rise=f"{rise:.3g}", n=len(diffs), se=f"{se:.2g}", best=best + 1, last=last + 1)
    head = (tr("setup.rise", "from epoch {best} to {last} the validation loss rose by {rise}; the standard error of that "
               "rise over the {n} validation samples (each one's loss at epoch {last} minus at epoch {best}) is {se}, so "
               "the rise is {x} standard errors", x=f"{rise / se:.1f}", **said) if se > 0 else
            tr("setup.rise_no_se", "from epoch {best} to {last} the validation loss rose by {rise}; the standard error of "
               "that rise over the {n} validation samples (each one's loss at epoch {last} minus at epoch {best}) is {se}",
               **said))
    picked = tr("setup.picked", "epoch {best} was picked as the lowest of {n} on these same samples, so its loss is low "
                "partly by chance and the rise is, if anything, overstated", best=best + 1, n=len(val_loss))
    epochs = dict(head=head, best=best + 1, spread=f"{spread:g}")
    if rise <= spread * se:
        return tr("setup.rise_noise", "{head}: within {spread} standard errors, a rise that the choice of validation "
                  "samples alone could make, so this run shows no rise in validation loss after epoch {best} that its "
                  "validation set can tell from noise ({picked})", picked=picked, **epochs)
    if train_loss[last] < train_loss[best]:
        return tr("setup.rise_overfit", "{head}: more than {spread}, while the training loss fell ({at_best} at epoch "
                  "{best}, {at_last} at the last): consistent with the start of overfitting, a gap that grows (Deep "
                  "Learning, §5.2: https://www.deeplearningbook.org/contents/ml.html). This standard error counts only "
                  "which samples were drawn for validation, not how another training run would bounce, and {picked}",
                  picked=picked, at_best=f"{train_loss[best]:.3g}", at_last=f"{train_loss[last]:.3g}", **epochs)
    return tr("setup.rise_no_overfit", "{head}: more than {spread}, but the training loss did not fall after epoch {best}, "
              "so this is not the pattern of overfitting (training loss falling while validation loss rises)", **epochs)


def openmp_runtime() -> str | None:
    """The OpenMP library this process has loaded, read from ``/proc/self/maps`` (Linux only; else None) (00)."""
    import re

    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        return None
    libs = sorted({line.split()[-1] for line in maps.splitlines() if re.search(r"/lib(gomp|iomp5|omp)[^/]*\.so", line)})
    return libs[0] if libs else None


def libgomp_spin_count(library: str, set_before_load: bool) -> int | None:
    """GOMP_SPINCOUNT as libgomp reports it (``OMP_DISPLAY_ENV=VERBOSE``, printed by its load-time constructor) in
    a fresh Python that sets ``OMP_WAIT_POLICY=PASSIVE`` before or after loading ``library``: 0 means waiting
    threads sleep at once (00). None where the library printed no such line (not libgomp)."""
    import os
    import re
    import subprocess
    import sys

    code = ("import ctypes, os, sys\nbefore = sys.argv[2] == '1'\n"
            "if before: os.environ['OMP_WAIT_POLICY'] = 'PASSIVE'\n"
            "ctypes.CDLL(sys.argv[1])\n"
            "if not before: os.environ['OMP_WAIT_POLICY'] = 'PASSIVE'\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    env["OMP_DISPLAY_ENV"] = "VERBOSE"
    r = subprocess.run([sys.executable, "-c", code, library, "1" if set_before_load else "0"], env=env,
                       capture_output=True, text=True, timeout=60)
    m = re.search(r"GOMP_SPINCOUNT = '(\d+)'", r.stderr)
    return int(m.group(1)) if m else None

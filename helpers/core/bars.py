"""Progress bars that read well live and in a saved notebook (00 onwards).

``tqdm.auto`` draws a widget in Jupyter; a saved notebook keeps only the widget's text fallback
from the moment it was displayed ("0%"), so a static render (GitHub, nbviewer, a lecture's
slides, JupyterLab without the widget's state) shows bars that never moved. :func:`progress` is
``tqdm.auto.tqdm``, except that in Jupyter, when the loop ends, the widget is replaced by one text
line with its final state. Bars with ``leave=False`` (one per epoch, say) share one output slot
per cell run: each replaces the one before, and the last one's final line stays, so that the
saved cell holds neither a stuck bar nor an empty output.
"""
from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm as _auto
from tqdm.auto import tqdm  # noqa: F401  (the return type)
from tqdm.autonotebook import tqdm as _picked  # the class tqdm.auto chose for this environment

__all__ = ["progress"]

try:
    from tqdm.notebook import tqdm as _widget_tqdm
except ImportError:  # no ipywidgets: tqdm.auto is the text bar, and progress() never gets to the widget
    _widget_tqdm = _auto

_IN_NOTEBOOK = _widget_tqdm is not _auto and issubclass(_picked, _widget_tqdm)


def progress(iterable: Any = None, **kwargs: Any) -> "tqdm":
    """``tqdm.auto.tqdm(iterable, **kwargs)``, whose saved output in Jupyter is the final state (00 onwards)."""
    if not _IN_NOTEBOOK or kwargs.get("disable"):
        return _auto(iterable, **kwargs)
    return _NotebookBar(iterable, **kwargs)


_TRANSIENT: dict[str, Any] = {"run": None, "handle": None}  # the leave=False slot of the cell run now going


def _cell_run() -> Any:
    """The request now running in this kernel: its message id (nbval runs cells without counting them)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        return None
    header = getattr(getattr(shell, "display_pub", None), "parent_header", None)
    msg_id = header.get("msg_id") if isinstance(header, dict) else None
    return msg_id or (id(shell), getattr(shell, "execution_count", None))


class _NotebookBar(_widget_tqdm):
    """The widget bar, displayed under a display id so that closing it can replace it with its final line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from IPython.display import display

        kwargs["display"] = False
        super().__init__(*args, **kwargs)
        run = _cell_run()
        if not self.leave and run is not None and _TRANSIENT["run"] == run:
            self._handle = _TRANSIENT["handle"]
            self._handle.update(self.container)
        else:
            self._handle = display(self.container, display_id=True)
            if not self.leave:
                _TRANSIENT.update(run=run, handle=self._handle)

    def close(self) -> None:
        if getattr(self, "_closed_once", False) or not hasattr(self, "_handle"):
            return super().close()
        self._closed_once = True
        final = self.format_meter(**{**self.format_dict, "ncols": 90, "ascii": False})
        super().close()
        if self._handle is not None:
            self._handle.update({"text/plain": final}, raw=True)

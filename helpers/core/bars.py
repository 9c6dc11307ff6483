"""Progress bars that read well live and in a saved notebook (00 onwards).

``tqdm.auto`` draws a widget in Jupyter; a saved notebook keeps only the widget's text fallback
from the moment it was displayed ("0%"), so a static render (GitHub, nbviewer, a lecture's
slides) shows bars that never moved. :func:`progress` is ``tqdm.auto.tqdm``, except that in
Jupyter, when the loop ends, the widget is replaced by one text line with its final state (or
by nothing, for ``leave=False``).
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


class _NotebookBar(_widget_tqdm):
    """The widget bar, displayed under a display id so that closing it can replace it with text."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from IPython.display import display

        kwargs["display"] = False
        super().__init__(*args, **kwargs)
        self._handle = display(self.container, display_id=True)

    def close(self) -> None:
        if getattr(self, "_closed_once", False) or not hasattr(self, "_handle"):
            return super().close()
        self._closed_once = True
        final = self.format_meter(**{**self.format_dict, "ncols": 90, "ascii": False})
        leave = self.leave
        super().close()
        if self._handle is not None:
            self._handle.update({"text/plain": final if leave else ""}, raw=True)

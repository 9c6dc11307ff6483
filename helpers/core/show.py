"""Show the real code a lesson runs, in the notebook: ``show(fn)`` (01 onwards).

Workers that other processes run must live in files (a spawned process imports them), so a
notebook cannot hold them in a cell. ``show`` prints their actual source, highlighted in Jupyter:
never a paraphrase of code that runs elsewhere. The file and line it comes from are named, so a
reader can open it.
"""
from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any


_ROOT = Path(__file__).resolve().parent.parent.parent


def _unwrap(obj: Any) -> Any:
    """The function a decorator wrapped (``functools.wraps`` sets ``__wrapped__``), else ``obj`` itself."""
    try:
        return inspect.unwrap(obj)
    except ValueError:  # a cycle of __wrapped__: show what we were given
        return obj


def source(obj: Any) -> str:
    """The source of a function, class or module, as written in its file, decorators included (01 onwards)."""
    try:
        return inspect.getsource(_unwrap(obj))
    except (TypeError, OSError) as e:
        raise TypeError(f"show() needs a function, class or module defined in a file, got {obj!r} ({e})") from None


def where(obj: Any) -> str:
    """``path:line`` of ``obj``'s definition, relative to the course folder when it is inside it (01 onwards).

    A decorated function is named by its own file, not the decorator's (``@record`` wraps
    ``helpers.ddp.script.main`` in a function defined in torch's files).
    """
    obj = _unwrap(obj)
    path = Path(inspect.getsourcefile(obj) or "?").resolve()
    line = inspect.getsourcelines(obj)[1] if not inspect.ismodule(obj) else 1
    try:
        path = path.relative_to(_ROOT)
    except ValueError:
        pass
    return f"{path}:{line}"


def show(*objs: Any) -> None:
    """Print the real source of each function, class or module, highlighted in Jupyter (01 onwards).

    Example::

        from helpers.core.show import show
        from helpers.ddp import train_worker
        show(train_worker)      # the DDP worker the launcher runs, as it is in helpers/ddp/recipe.py
    """
    for obj in objs:
        text = f"# {where(obj)}\n{source(obj).rstrip()}\n"
        try:
            from IPython import get_ipython
            from IPython.display import display
        except ImportError:
            print(text)
            continue
        if get_ipython() is None:
            print(text)
            continue
        display({"text/plain": text, "text/html": _highlight(text)}, raw=True)


def _highlight(text: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import PythonLexer

    return highlight(text, PythonLexer(), HtmlFormatter(noclasses=True, nobackground=True, style="friendly"))

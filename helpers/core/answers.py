"""Reading a student's answer before it is checked, and printing the verdict so it reads well (all notebooks).

:func:`untouched_skeleton` tells a code exercise's unedited skeleton from an attempt, so that its check says
⏳ (not answered yet) rather than ❌; :func:`wrap` breaks a self-check's message at word boundaries.
"""
from __future__ import annotations

import ast
import inspect
import textwrap
import unicodedata
from typing import Any

__all__ = ["untouched_skeleton", "wrap", "columns"]

_SKELETON_CALLS = frozenset({"max", "min", "len", "float", "int", "list", "dict", "tuple", "set"})


def _plain(node: ast.AST) -> bool:
    """Whether an expression only names or combines constants (``0``, ``[0] * n``, ``correct / max(seen, 1)``)."""
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_plain(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _plain(k) for k in node.keys) and all(_plain(v) for v in node.values)
    if isinstance(node, ast.BinOp):
        return _plain(node.left) and _plain(node.right)
    if isinstance(node, ast.UnaryOp):
        return _plain(node.operand)
    if isinstance(node, ast.Call):
        return (isinstance(node.func, ast.Name) and node.func.id in _SKELETON_CALLS and not node.keywords
                and all(_plain(a) for a in node.args))
    return False


def _idle(stmt: ast.stmt, placeholder_kept: bool) -> bool:
    """A statement of a skeleton: ``...``, ``pass``, a docstring, a constant or name returned, a constant assigned;
    beside a kept ``...``, also a value looked up for later (``rank, n = dist.get_rank(), dist.get_world_size()``)."""
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.Return):
        return stmt.value is None or _plain(stmt.value)
    if isinstance(stmt, ast.Assign) and all(_names(t) for t in stmt.targets):
        value = stmt.value
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        value = stmt.value
    else:
        return False
    if value is None or _plain(value):
        return True
    return placeholder_kept and not any(isinstance(n, (ast.Lambda, ast.comprehension, ast.NamedExpr))
                                        for n in ast.walk(value))


def _names(target: ast.expr) -> bool:
    return isinstance(target, ast.Name) or (isinstance(target, ast.Tuple) and all(_names(e) for e in target.elts))


def untouched_skeleton(fn: Any) -> bool:
    """Whether ``fn`` is still an exercise's skeleton: its body holds the placeholder (``...``, ``pass`` or a
    ``# your code`` comment) and nothing that acts (no loop, test, ``with`` or call made for its effect; only
    values set, and a constant or a name returned).

    A code check that fails on such a function says ⏳ (not answered yet), as for ``None``, instead of ❌
    (all notebooks). A function whose source cannot be read (built in, made by ``exec``) is never taken for
    a skeleton.
    """
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, ValueError):
        return False
    if len(tree.body) != 1 or not isinstance(tree.body[0], (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = tree.body[0].body
    ellipsis = any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is Ellipsis
                   for s in body)
    placeholder = ellipsis or "# your code" in source or any(isinstance(s, ast.Pass) for s in body)
    return placeholder and all(_idle(s, ellipsis) for s in body)


def is_skeleton(fn: Any, skeleton: str) -> bool:
    """Whether ``fn`` is the function ``skeleton`` (its source) defines, unchanged but for comments and layout (10).

    For an exercise whose skeleton is a scaffold (a training loop with places to fill): it acts, so
    :func:`untouched_skeleton` cannot tell it from an attempt; the lesson gives the scaffold's source instead.
    """
    try:
        mine = ast.parse(textwrap.dedent(inspect.getsource(fn))).body
        given = ast.parse(textwrap.dedent(skeleton)).body
    except (OSError, TypeError, SyntaxError, ValueError):
        return False
    defs = [d for d in given if isinstance(d, (ast.FunctionDef, ast.AsyncFunctionDef)) and d.name == fn.__name__]
    return len(mine) == 1 and len(defs) == 1 and ast.dump(mine[0]) == ast.dump(defs[0])


def columns(text: str) -> int:
    """How many columns ``text`` takes in a monospaced output, for wrapped messages and tables aligned in Korean
    too: wide characters (Hangul, emoji) take two (all notebooks)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def wrap(message: str, width: int = 88, indent: str = "   ") -> str:
    """``message`` broken at spaces into lines of at most ``width`` columns, continuation lines indented (all notebooks).

    JupyterLab breaks a long output line wherever the panel ends, mid-word ("so ca/n"); lines broken here at
    word boundaries fit a usual panel. Wide characters count as two columns; a word longer than a line is
    kept whole. Line breaks already in the message are kept.
    """
    lines = []
    for paragraph in message.split("\n"):
        line = ""
        for word in paragraph.split(" "):
            candidate = f"{line} {word}" if line else word
            if line.strip() and columns(candidate) > width:
                lines.append(line)
                line = indent + word
            else:
                line = candidate
        lines.append(line)
    return "\n".join(lines)

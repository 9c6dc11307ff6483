"""Self-checks for the exercises: ``check("00.batches_of_100", answer)`` says ✅ and why, or gives a hint.

Used by every notebook. The expected answers are not written in the course's source: each is
stored as a salted hash of its normal form, or computed at check time from the reader's own
machine or run where it depends on them (the number of cores, say). A wrong or missing answer
gets a hint that points at the idea, never at the answer.

What counts as an answer: a number (int, float, a NumPy scalar or a one-element tensor), a list
of numbers (a list, tuple, NumPy array or 1-D tensor), or a short text. Numbers are compared at
the precision the exercise states (e.g. two significant digits: 0.33 for a third); anything
else, such as an object that claims to equal everything, is refused.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

from .answers import is_skeleton, untouched_skeleton, wrap
from .i18n import exercise_text, tr


_SALT = "beyond-one-gpu/self-check/v1"


class NotAnAnswer(TypeError):
    """The value cannot be read as a number, a list of numbers, or a text (all notebooks)."""


@dataclass
class Exercise:
    """One self-check: the expected answer (hashed, or computed), its form and precision, a hint, and why (all notebooks).

    ``kind``: ``"int"``, ``"number"`` (compared at ``digits`` significant digits), ``"ints"`` /
    ``"numbers"`` (lists), or ``"text"``: give either ``digest`` (see :func:`digest`) or
    ``compute`` (a function returning the expected answer on this machine). ``"code"``: the
    answer is the student's function, and ``behaviour(fn)`` runs it against the reference
    behaviour, returning ``None`` when it behaves right, else what differs (in words that help,
    never the reference code); ``skeleton``, the source of a scaffold the notebook gives, makes that
    scaffold, left as it is, "not answered yet" like any untouched skeleton.
    """

    id: str
    kind: str
    hint: str
    why: str = ""
    digest: str | None = None
    compute: Callable[[], Any] | None = None
    digits: int = 2
    behaviour: Callable[[Callable], str | None] | None = None
    skeleton: str | None = None  # a scaffold's source, for a code exercise whose skeleton acts (:func:`is_skeleton`)

    def __post_init__(self) -> None:
        if self.kind not in ("int", "number", "ints", "numbers", "text", "code"):
            raise ValueError(f"exercise {self.id}: unknown kind {self.kind!r}")
        if self.kind == "code":
            if self.behaviour is None:
                raise ValueError(f"exercise {self.id}: a code exercise needs behaviour=")
        elif (self.digest is None) == (self.compute is None):
            raise ValueError(f"exercise {self.id}: give exactly one of digest= and compute=")

    def normal(self, value: Any) -> str:
        """The normal form of ``value`` for this exercise (raises :class:`NotAnAnswer`)."""
        return normal_form(value, self.kind, self.digits)

    def expected_digest(self) -> str:
        return self.digest if self.digest is not None else digest(self.id, self.normal(self.compute()))


def _number(value: Any) -> float | int:
    """A plain Python number from an int, float, Fraction, NumPy scalar or one-element tensor; else NotAnAnswer.

    Subclasses are read through the base type's own conversion, so an object cannot pass by
    overriding ``__eq__`` or ``__float__``.
    """
    if isinstance(value, bool):
        raise NotAnAnswer(tr("check.bool", "a True/False is not a number here"))
    if isinstance(value, int):
        return int.__index__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Fraction):
        return Fraction(value.numerator, value.denominator).__float__()
    mod = type(value).__module__.split(".")[0]
    item = None
    if getattr(value, "is_meta", False) is True:
        raise NotAnAnswer(_no_values(value))
    if mod == "numpy" and hasattr(value, "item") and getattr(value, "size", 0) == 1:
        item = value.item()
    elif mod == "torch" and hasattr(value, "numel") and value.numel() == 1:
        item = value.item()
    if type(item) in (int, float):
        return item
    raise NotAnAnswer(tr("check.not_number", "expected a number, got {type}", type=type(value).__name__))


def _sequence(value: Any) -> list:
    if type(value) in (list, tuple):
        return list(value)
    mod = type(value).__module__.split(".")[0]
    if getattr(value, "is_meta", False) is True:
        raise NotAnAnswer(_no_values(value))
    if mod in ("numpy", "torch") and hasattr(value, "tolist"):
        items = value.tolist()
        if isinstance(items, list):
            return items
    raise NotAnAnswer(tr("check.not_list", "expected a list of numbers, got {type}", type=type(value).__name__))


def _no_values(value: Any) -> str:
    return tr("check.meta", "this {type} is on the meta device: it has a shape but no values. Compute the answer on "
              "a real device (the CPU or a GPU) and give the number", type=type(value).__name__)


def normal_form(value: Any, kind: str, digits: int = 2) -> str:
    """The text an answer is compared by: ints exactly, other numbers at ``digits`` significant digits (all notebooks)."""
    if kind == "text":
        if type(value) is not str:
            raise NotAnAnswer(tr("check.not_text", "expected a text, got {type}", type=type(value).__name__))
        return " ".join(value.lower().split())
    if kind in ("ints", "numbers"):
        return "[" + ",".join(normal_form(v, kind[:-1] if kind == "ints" else "number", digits)
                              for v in _sequence(value)) + "]"
    x = _number(value)
    try:
        float(x)
    except OverflowError:  # an int beyond 10³⁰⁸: too big to be any answer, and too big to print
        raise NotAnAnswer(tr("check.too_large", "that number is beyond 10³⁰⁸: far too large to be the answer")) from None
    if not math.isfinite(x):
        raise NotAnAnswer(tr("check.not_finite", "expected a finite number"))
    if kind == "int":
        if x != int(x):
            raise NotAnAnswer(tr("check.not_whole", "expected a whole number"))
        return str(int(x))
    return f"{float(x):.{digits}g}"


def digest(exercise_id: str, normal: str) -> str:
    """The salted hash an expected answer is stored as (all notebooks)."""
    return hashlib.sha256(f"{_SALT}|{exercise_id}|{normal}".encode()).hexdigest()


_REGISTRY: dict[str, Exercise] = {}


def register(*exercises: Exercise) -> None:
    """Add exercises to the registry that :func:`check` looks them up in (all notebooks)."""
    for ex in exercises:
        _REGISTRY[ex.id] = ex


def exercises() -> dict[str, Exercise]:
    """Every exercise of the course, by id: each lesson declares its own in ``EXERCISES`` (all notebooks)."""
    _discover()
    return dict(_REGISTRY)


_FINDERS: list[Callable[[str | None], None]] = []  # the package's lesson finder (helpers.course.load_exercises)


def find_exercises_with(find: Callable[[str | None], None]) -> None:
    """How the registry finds an exercise it does not hold yet (all notebooks): ``find(id)`` registers the lesson
    that declares ``id``, ``find(None)`` every lesson. ``helpers`` gives it :func:`helpers.course.load_exercises`:
    the lessons are found from above, and the core imports none of them.
    """
    _FINDERS[:] = [find]


def _discover(exercise_id: str | None = None) -> None:
    """Register the exercises of the lesson ``exercise_id`` names (``None``: of every lesson), through the finder."""
    for find in _FINDERS:
        find(exercise_id)


def verify(exercise: str, answer: Any) -> tuple[bool, str]:
    """Whether ``answer`` to ``exercise`` is right, and the message a student sees, never the answer (all notebooks)."""
    if exercise not in _REGISTRY:
        _discover(exercise)  # the lesson of the notebook the id names, only
    if exercise not in _REGISTRY:
        _discover()  # every lesson, to list the ids there are
    if exercise not in _REGISTRY:
        raise KeyError(tr("check.unknown", "no exercise called {exercise!r}; the ids look like '00.batches_of_100' (known: {known})",
                          exercise=exercise, known=", ".join(sorted(_REGISTRY))))
    ex = _REGISTRY[exercise]
    hint, why = exercise_text(ex.id, "hint", ex.hint), exercise_text(ex.id, "why", ex.why)
    precision = (tr("check.precision", " (to {digits} significant digits)", digits=ex.digits)
                 if ex.kind in ("number", "numbers") else "")
    if answer is None or answer is ... or (isinstance(answer, str) and not answer.strip()):
        return False, tr("check.unanswered", "⏳ {id}: not answered yet — replace None with your answer{precision}. "
                         "Hint: {hint}", id=exercise, precision=precision, hint=hint)
    if ex.kind == "code":
        ok, message = _verify_code(ex, answer, hint, why)
        if not ok and ex.skeleton is not None and is_skeleton(answer, ex.skeleton):
            return False, tr("check.scaffold_unanswered", "⏳ {id}: not answered yet — your function is still the "
                             "notebook's skeleton. Write your code where it says ... # your code. Hint: {hint}",
                             id=exercise, hint=hint)
        if not ok and untouched_skeleton(answer):
            return False, tr("check.code_unanswered", "⏳ {id}: not answered yet — your function is still the skeleton: "
                             "it computes nothing from its inputs. Write your code where it says ... or # your code. "
                             "Hint: {hint}", id=exercise, hint=hint)
        return ok, message
    try:
        given = ex.normal(answer)
    except NotAnAnswer as e:
        return False, tr("check.unreadable", "❌ {id}: {problem}{precision}. Hint: {hint}",
                         id=exercise, problem=e, precision=precision, hint=hint)
    except (Exception, SystemExit) as e:  # an answer whose own methods fail: it is still not an answer
        problem = tr("check.unreadable_value", "your answer could not be read as a number, a list of numbers or a "
                     "text (reading it raised {error}: {message})", error=type(e).__name__, message=e)
        return False, tr("check.unreadable", "❌ {id}: {problem}{precision}. Hint: {hint}",
                         id=exercise, problem=problem, precision=precision, hint=hint)
    if digest(ex.id, given) == ex.expected_digest():
        return True, tr("check.correct", "✅ {id}: correct!", id=exercise) + (f" {why}" if why else "")
    return False, tr("check.wrong", "❌ {id}: not quite{precision}. Hint: {hint}", id=exercise, precision=precision,
                     hint=hint)


def _verify_code(ex: Exercise, fn: Any, hint: str, why: str) -> tuple[bool, str]:
    """Run the student's function against the reference behaviour; their exceptions become hints."""
    if not callable(fn):
        return False, tr("check.not_function", "❌ {id}: expected your function (its name, without calling it). "
                         "Hint: {hint}", id=ex.id, hint=hint)
    try:
        problem = ex.behaviour(fn)
    except SystemExit as e:  # exit() or sys.exit() in the student's code: a hint, not the end of the kernel
        return False, tr("check.exited", "❌ {id}: your function called exit() or sys.exit() (SystemExit: {code}), "
                         "which would end the whole program (in a notebook, the kernel), not just your function: "
                         "return the result instead. Hint: {hint}", id=ex.id, code=e.code, hint=hint)
    except Exception as e:  # the student's code raised: say what, and where to look
        return False, tr("check.raised", "❌ {id}: your function raised {error}: {message}. Hint: {hint}",
                         id=ex.id, error=type(e).__name__, message=e, hint=hint)
    if problem:
        return False, tr("check.behaves_differently", "❌ {id}: {problem}. Hint: {hint}", id=ex.id, problem=problem,
                         hint=hint)
    return True, tr("check.behaves", "✅ {id}: it behaves as the reference does.", id=ex.id) + (f" {why}" if why else "")


def check(exercise: str, answer: Any) -> None:
    """Check a student's ``answer`` to ``exercise``: prints ✅ and why, or a hint, wrapped at word boundaries (all notebooks)."""
    print(wrap(verify(exercise, answer)[1]))

"""helpers.core.show: the real source of what a lesson runs, named by its own file (01 onwards)."""
import functools

from helpers.core.show import show, source, where


def _decorate(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@_decorate
def _decorated(x):
    """A function behind a decorator, as ``@record`` puts ``main`` behind torch's wrapper."""
    return x + 1


def test_a_decorated_function_is_named_by_its_own_file_and_line():
    assert where(_decorated).startswith("tests/test_show.py:")
    line = int(where(_decorated).rsplit(":", 1)[1])
    assert open(__file__).read().splitlines()[line - 1] == "@_decorate"
    assert "return x + 1" in source(_decorated) and "def wrapper" not in source(_decorated)


def test_torchrun_script_main_is_shown_from_the_course_not_from_torch(capsys):
    from helpers.ddp import script
    show(script.main)
    out = capsys.readouterr().out
    assert out.startswith("# helpers/ddp/script.py:") and "site-packages" not in out
    assert "@record" in out and "init_process_group" in out


"""Notebook 04's code exercise, a trainable that reports config["x"] * epoch for epochs 1, 2, 3: the right one passes
in its correct forms; reports out of step with training, wrong reports and Ray's other report functions are refused."""
import pytest

from helpers.core.checks import verify


# --- the code exercise: a trainable that reports config["x"] * epoch for epochs 1, 2, 3 -------------------------

def right(config):
    from ray import tune

    for epoch in range(1, 4):
        config["train_epoch"]()
        tune.report({"score": config["x"] * epoch})


def reports_what_training_returned(config):  # the score train_epoch returns: the same numbers, accepted
    from ray import tune

    for _ in range(3):
        tune.report({"score": config["train_epoch"]()})


def trains_all_then_reports(config):  # every score computed before the first report: ASHA could stop nothing
    from ray import tune

    scores = [config["train_epoch"]() for _ in range(3)]
    for score in scores:
        tune.report({"score": score})


def reports_before_training(config):  # each epoch's score reported before that epoch trains
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": config["x"] * epoch})
        config["train_epoch"]()


def never_trains(config):  # the right scores, but no epoch of training between them
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": config["x"] * epoch})


def ignores_config(config):  # passes a check that only tries x = 2.0
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": 2.0 * epoch})


def table(config):  # a hard-coded table of the configs a fixed check would try
    from ray import tune

    for v in {2.0: [2.0, 4.0, 6.0], -0.5: [-0.5, -1.0, -1.5]}.get(config["x"], [0.0, 0.0, 0.0]):
        tune.report({"score": v})


def old_keyword_form(config):
    from ray import tune

    for epoch in range(1, 4):
        tune.report(score=config["x"] * epoch)


def once_at_the_end(config):
    from ray import tune

    tune.report({"score": config["x"] * 3})


def epochs_from_zero(config):
    from ray import tune

    for epoch in range(3):
        tune.report({"score": config["x"] * epoch})


def epoch_as_a_keyword(config):  # the recorder took it; Ray 2.60's tune.report raises TypeError
    from ray import tune

    for epoch in range(1, 4):
        tune.report({"score": config["x"] * epoch}, epoch=epoch)


def metrics_by_name(config):  # report(metrics={...}) binds like Ray's own: accepted
    from ray import tune

    for epoch in range(1, 4):
        config["train_epoch"]()
        tune.report(metrics={"score": config["x"] * epoch})


def never_reports(config):
    return [config["x"] * e for e in (1, 2, 3)]


def wraps_the_course_trainable(config):
    from helpers.tuning import train_digits

    train_digits(config)


def test_the_right_trainable_passes():
    for _ in range(5):  # a new random config every time
        assert verify("04.trainable", right)[0]
        assert verify("04.trainable", reports_what_training_returned)[0]


def test_train_epoch_returns_the_score_the_exercise_says():
    """Exercise 5 says config["train_epoch"]() returns config["x"] * epoch: reporting what it returns is right."""
    seen = []

    def compares(config):
        from ray import tune

        for epoch in range(1, 4):
            seen.append((config["train_epoch"](), config["x"] * epoch))
            tune.report({"score": config["x"] * epoch})

    assert verify("04.trainable", compares)[0]
    assert len(seen) == 9 and all(got == pytest.approx(said) for got, said in seen), seen


@pytest.mark.parametrize("wrong", [trains_all_then_reports, reports_before_training, never_trains], ids=lambda f: f.__name__)
def test_a_report_out_of_step_with_training_is_refused(wrong):
    """The right scores, reported all after training or before each epoch trains: refused, with the order said."""
    ok, msg = verify("04.trainable", wrong)
    assert not ok and "order" in msg, msg


@pytest.mark.parametrize("wrong", [ignores_config, table, old_keyword_form, once_at_the_end, epochs_from_zero,
                                   epoch_as_a_keyword, never_reports, wraps_the_course_trainable,
                                   trains_all_then_reports, reports_before_training, never_trains],
                         ids=lambda f: f.__name__)
def test_wrong_trainables_are_refused(wrong):
    for _ in range(5):
        ok, msg = verify("04.trainable", wrong)
        assert not ok and "Hint" in msg, msg


def _defined_in_a_notebook(source: str, name: str):
    """A function defined the way a notebook cell defines it: in a namespace of its own, with its imports."""
    namespace: dict = {}
    exec(source, namespace)
    return namespace[name]


def test_right_trainables_in_other_correct_forms_pass():
    imported_report = _defined_in_a_notebook(
        "from ray.tune import report\n"
        "def my_trainable(config):\n"
        "    for epoch in (1, 2, 3):\n"
        "        config['train_epoch']()\n"
        "        report({'score': config['x'] * epoch})\n", "my_trainable")
    tensor_score = _defined_in_a_notebook(
        "import torch\nfrom ray import tune\n"
        "def my_trainable(config):\n"
        "    for epoch in (1, 2, 3):\n"
        "        config['train_epoch']()\n"
        "        tune.report({'score': torch.tensor(config['x'], dtype=torch.float64) * epoch})\n", "my_trainable")
    for fn in (imported_report, tensor_score):
        ok, msg = verify("04.trainable", fn)
        assert ok, msg
    import ray.tune
    assert imported_report.__globals__["report"] is ray.tune.report   # the check put the student's name back


def test_ray_train_report_is_refused_with_a_pointer_to_tune_report():
    train_report = _defined_in_a_notebook(
        "import ray.train\n"
        "def my_trainable(config):\n"
        "    for epoch in (1, 2, 3):\n"
        "        ray.train.report({'score': config['x'] * epoch})\n", "my_trainable")
    ok, msg = verify("04.trainable", train_report)
    assert not ok and "ray.tune.report" in msg and "ray.train.report" in msg, msg


def test_extra_arguments_are_refused_as_ray_would_refuse_them():
    """tune.report({...}, epoch=e) records fine, but Ray's report raises TypeError: the check says so."""
    ok, msg = verify("04.trainable", epoch_as_a_keyword)
    assert not ok and "refuse" in msg, msg
    assert verify("04.trainable", metrics_by_name)[0]


def test_ray_air_session_report_is_refused_with_a_pointer_to_tune_report():
    """The older Ray AIR form, under each way of reaching it, gets a message that names it, not 'never called'."""
    forms = {
        "module": "from ray.air import session\n"
                  "def my_trainable(config):\n"
                  "    for epoch in (1, 2, 3):\n"
                  "        session.report({'score': config['x'] * epoch})\n",
        "name": "from ray.air.session import report\n"
                "def my_trainable(config):\n"
                "    for epoch in (1, 2, 3):\n"
                "        report({'score': config['x'] * epoch})\n",
        "dotted": "import ray.air.session\n"
                  "def my_trainable(config):\n"
                  "    for epoch in (1, 2, 3):\n"
                  "        ray.air.session.report({'score': config['x'] * epoch})\n",
    }
    import ray.air.session

    original = ray.air.session.report
    for form, source in forms.items():
        fn = _defined_in_a_notebook(source, "my_trainable")
        ok, msg = verify("04.trainable", fn)
        assert not ok and "ray.air.session.report" in msg and "ray.tune.report" in msg and "never called" not in msg, (form, msg)
    assert ray.air.session.report is original   # the check put Ray's function back

"""Sweep spaces, trial names, best-trial choice and the driver's argument errors (no Ray cluster)."""

import math

import pytest
from ray.tune.search.sample import Categorical, Float, Integer

from workloads.sweep import UsageError, best_trial, import_trainable, main, parse_options
from workloads.sweep_tracking import default_artifact_location, reported_metrics
from workloads.tiny_transformer import tune_trial
from workloads.tune_space import SpaceError, TrialNamer, dirname, parse_space, trial_name

EXAMPLE = (
    '{"lr": {"loguniform": [1e-4, 1e-2]}, "d_model": {"randint": [32, 128]}, '
    '"strategy": {"choice": ["ddp", "fsdp"]}, "x": {"uniform": [0, 1]}, "epochs": 3}'
)


def test_the_example_space_becomes_tune_samplers_and_fixed_values():
    space = parse_space(EXAMPLE)
    assert space.sampled == ("lr", "d_model", "strategy", "x")
    tune_space = space.to_tune()
    assert isinstance(tune_space["lr"], Float) and (tune_space["lr"].lower, tune_space["lr"].upper) == (1e-4, 1e-2)
    assert type(tune_space["lr"].get_sampler()).__name__ == "_LogUniform"
    assert type(tune_space["x"].get_sampler()).__name__ == "_Uniform"
    assert isinstance(tune_space["strategy"], Categorical) and tune_space["strategy"].categories == ["ddp", "fsdp"]
    assert isinstance(tune_space["d_model"], Integer)
    assert tune_space["epochs"] == 3


def test_randint_bounds_are_both_reachable():
    sampler = parse_space('{"layers": {"randint": [1, 3]}}').to_tune()["layers"]
    assert set(sampler.sample(size=200, random_state=0)) == {1, 2, 3}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"lr": ', "not valid JSON"),
        ('[{"lr": 1}]', "must be a JSON object"),
        ('{"": 1}', "empty name"),
        ('{"lr": {"logunif": [1, 2]}}', "parameter lr: logunif is not a distribution; write one of choice"),
        ('{"lr": {"uniform": [0, 1], "choice": [1]}}', "parameter lr: uniform, choice is not a distribution"),
        ('{"lr": {}}', "parameter lr: nothing is not a distribution"),
        ('{"lr": {"loguniform": [0, 0.1]}}', "parameter lr: loguniform needs low > 0"),
        ('{"x": {"uniform": [1, 1]}}', r"parameter x: uniform needs low < high, got \[1, 1\]"),
        ('{"x": {"uniform": [0, 1, 2]}}', r"parameter x: uniform takes two numbers \[low, high\]"),
        ('{"x": {"uniform": ["a", "b"]}}', "parameter x: uniform takes two numbers"),
        ('{"x": {"uniform": 3}}', "parameter x: uniform takes two numbers"),
        ('{"d": {"randint": [1.5, 4]}}', "parameter d: randint takes two integers"),
        ('{"d": {"randint": [8, 4]}}', "parameter d: randint takes two integers .* low <= high"),
        ('{"s": {"choice": []}}', "parameter s: choice takes a non-empty list"),
        ('{"s": {"choice": "ddp"}}', "parameter s: choice takes a non-empty list"),
    ],
)
def test_bad_spaces_say_which_parameter_and_what_to_write(text, message):
    with pytest.raises(SpaceError, match=message):
        parse_space(text)


def test_upper_bound_reads_fixed_values_and_distributions():
    space = parse_space('{"epochs": {"randint": [2, 6]}, "e2": {"choice": [2, 9]}, "s": {"choice": ["a"]}, "f": 4}')
    assert [space.upper_bound(name) for name in ("epochs", "e2", "s", "f", "missing")] == [6, 9, None, 4, None]


def test_trial_names_are_the_sampled_values_in_space_order():
    config = {"d_model": 64, "lr": 0.0031234, "strategy": "fsdp", "epochs": 3, "amp": True}
    assert trial_name(config, ("lr", "d_model")) == "lr=0.0031 d_model=64"
    assert trial_name(config, ("strategy", "amp")) == "strategy=fsdp amp=true"
    assert trial_name(config, ()) == "trial"
    assert trial_name({"lr": 1.5e-5}, ("lr",)) == "lr=1.5e-05"


def test_repeated_names_get_a_number_and_each_trial_keeps_its_own():
    namer = TrialNamer(("lr",))
    assert namer.name("a", {"lr": 0.00312}) == "lr=0.0031"
    assert namer.name("b", {"lr": 0.00314}) == "lr=0.0031 #2"
    assert namer.name("c", {"lr": 0.02}) == "lr=0.02"
    # Tune asks again for the folder: same trial, same name.
    assert namer.name("b", {"lr": 0.00314}) == "lr=0.0031 #2"
    assert namer.dirname("b", {"lr": 0.00314}) == "lr=0.0031_2"


def test_folder_names_keep_only_path_safe_characters():
    assert dirname("lr=0.0031 d_model=64") == "lr=0.0031_d_model=64"
    assert dirname("path=a/b (c) #3") == "path=a-b_-c-_3"
    assert len(dirname("x=" + "9" * 300)) == 100


def test_the_best_trial_is_the_best_finite_value_for_the_mode():
    values = {"a": 0.5, "b": 0.2, "c": math.nan, "d": 0.9}
    assert best_trial(values, "min") == ("b", 0.2)
    assert best_trial(values, "max") == ("d", 0.9)
    assert best_trial({"a": math.inf, "b": math.nan}, "min") is None
    assert best_trial({}, "max") is None


def test_results_keep_what_the_trainable_reported_not_tunes_bookkeeping():
    result = {
        "epoch": 2,
        "val_loss": 1.25,
        "note": "text",
        "training_iteration": 2,
        "time_this_iter_s": 0.4,
        "done": False,
        "trial_id": "a1b2",
        "config": {"lr": 0.1},
    }
    assert reported_metrics(result) == {"epoch": 2.0, "val_loss": 1.25}


def test_a_sqlite_store_keeps_artifacts_beside_its_database(tmp_path, monkeypatch):
    assert default_artifact_location("sqlite:////x/mlflow.db") == "/x/mlartifacts"
    monkeypatch.chdir(tmp_path)
    assert default_artifact_location("sqlite:///data/mlflow.db?timeout=5") == str(tmp_path / "data" / "mlartifacts")
    assert default_artifact_location("http://mlflow:5000") is None


REQUIRED = [
    "--trainable", "workloads.tiny_transformer:tune_trial",
    "--trials", "3", "--metric", "val_loss", "--mode", "min",
    "--tracking-uri", "sqlite:////tmp/x.db", "--experiment", "e", "--model-name", "m", "--sweep-id", "s1",
]  # fmt: skip


def test_options_default_the_storage_to_an_absolute_path(monkeypatch, tmp_path):
    monkeypatch.setenv("TRAINBOT_STORAGE", str(tmp_path / "runs"))
    options = parse_options([*REQUIRED, "--space", EXAMPLE])
    assert (options.storage_path, options.scheduler, options.trials) == (str(tmp_path / "runs"), "asha", 3)
    assert parse_options([*REQUIRED, "--space", "{}", "--storage-path", "s3://bucket/runs"]).storage_path == (
        "s3://bucket/runs"
    )


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (["--space", '{"lr": {"logunif": [1, 2]}}'], "--space: parameter lr: logunif is not a distribution"),
        (["--space", "{bad"], "--space: the space is not valid JSON"),
        (["--space", "{}", "--trials", "0"], "--trials 0: must be at least 1"),
        (["--space", "{}", "--sweep-id", "a b"], "--sweep-id 'a b'"),
        (["--space", "{}", "--mode", "best"], "argument --mode: invalid choice"),
        (["--space", "{}", "--trainable", "workloads.nothing_here:fn"], "cannot import workloads.nothing_here"),
        (["--space", "{}", "--trainable", "workloads.tune_space:no_such_fn"], "has no function no_such_fn"),
        (["--space", "{}", "--trainable", "tune_trial"], "write MODULE:FUNCTION"),
    ],
)
def test_argument_mistakes_exit_2_with_one_line(changes, message, capsys):
    argv = [*REQUIRED, *changes]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert captured.err.startswith("sweep: ")
    assert message in captured.err


def test_a_missing_argument_is_named(capsys):
    assert main(["--space", "{}"]) == 2
    assert "the following arguments are required: --trainable" in capsys.readouterr().err


def test_import_trainable_returns_the_function():
    assert import_trainable("workloads.tiny_transformer:tune_trial") is tune_trial
    with pytest.raises(UsageError, match="has no function"):
        import_trainable("workloads.tiny_transformer:DEFAULT_JOB")

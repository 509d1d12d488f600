"""Job templates: typed parameters refuse what is not a value of their type, config templates validate."""

import dataclasses
import shlex

import pytest

from actions.errors import BadRequest, Forbidden, NotFound
from actions.jobs.templates import TINY_TRANSFORMER, find_template, load_templates, manifest_template
from actions.people import People
from workloads.train_config import TrainConfig

HOSTILE = ["1;rm -rf /", "$(id)", "`id`", "1\nid", "0.1 && id", "x|sh", "${HOME}", "'", '"']
CONFIGURED = {
    "resnet": {
        "entrypoint": ["python", "train.py"],
        "params": {
            "lr": {"type": "float", "default": 0.1, "min": 1e-5, "max": 1},
            "depth": {"type": "int", "default": 50, "min": 18, "max": 152},
            "amp": {"type": "bool", "default": True},
            "optimizer": {"type": "choice", "choices": ["sgd", "adamw"], "default": "sgd"},
            "dataset": {"type": "str", "pattern": "[a-z0-9-]{1,40}", "default": "imagenet-1k"},
        },
        "workers": {"default": 2, "max": 16},
        "gpus_per_worker": {"default": 1, "max": 8},
        "allowed": ["alice", "U024BE7LH"],
        "runtime_env": {"pip": ["timm==1.0.9"], "env_vars": {"NCCL_DEBUG": "INFO"}},
    }
}


@pytest.fixture
def resnet():
    return load_templates(CONFIGURED)["resnet"]


def test_values_are_parsed_by_their_declared_types(resnet):
    params = resnet.parse_params(["lr=1e-3", "depth=101", "amp=off", "optimizer=adamw", "dataset=cifar-10"])
    assert params == {"lr": 0.001, "depth": 101, "amp": False, "optimizer": "adamw", "dataset": "cifar-10"}


def test_defaults_fill_what_is_not_given(resnet):
    assert resnet.parse_params([]) == {
        "lr": 0.1,
        "depth": 50,
        "amp": True,
        "optimizer": "sgd",
        "dataset": "imagenet-1k",
    }


@pytest.mark.parametrize("param", ["lr", "depth", "amp", "optimizer", "dataset"])
@pytest.mark.parametrize("value", HOSTILE)
def test_shell_syntax_is_refused_for_every_type_with_the_parameter_named(resnet, param, value):
    with pytest.raises(BadRequest, match=rf"^parameter {param}:"):
        resnet.parse_params([f"{param}={value}"])


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("lr=2", "lr: 2.0 is above the maximum 1"),
        ("lr=0", "lr: 0.0 is below the minimum 1e-05"),
        ("lr=nan", "lr: 'nan' is not a number"),
        ("lr=inf", "lr: 'inf' is not a number"),
        ("depth=50.5", "depth: '50.5' is not an integer"),
        ("depth=1_000", "depth: '1_000' is not an integer"),
        ("amp=maybe", "amp: 'maybe' is not true or false"),
        ("optimizer=lion", "optimizer: 'lion' is not one of sgd, adamw"),
        ("dataset=ImageNet", "dataset: 'ImageNet' does not match"),
        ("dataset=" + "a" * 300, "dataset: value longer than 256"),
    ],
)
def test_out_of_range_and_mistyped_values_say_what_is_wrong(resnet, word, message):
    with pytest.raises(BadRequest, match="parameter " + message.replace("(", r"\(").replace(".", r"\.")):
        resnet.parse_params([word])


def test_unknown_keys_and_words_without_a_value_are_refused(resnet):
    with pytest.raises(BadRequest, match=r"unknown parameter 'momentum' for template resnet \(known: amp, dataset"):
        resnet.parse_params(["momentum=0.9"])
    with pytest.raises(BadRequest, match="written key=value"):
        resnet.parse_params(["lr"])
    with pytest.raises(BadRequest, match="written key=value"):
        resnet.parse_params(["$(id)=1"])


def test_argv_keeps_each_value_one_word_through_shlex(resnet):
    params = resnet.parse_params(["dataset=a-b"])
    argv = resnet.argv(params, workers=2, gpus_per_worker=1)
    assert argv[:2] == ["python", "train.py"]
    assert shlex.split(shlex.join(argv)) == argv
    assert argv[argv.index("--dataset") + 1] == "a-b"


def test_the_built_in_passes_its_size_as_flags():
    argv = TINY_TRANSFORMER.argv(TINY_TRANSFORMER.parse_params([]), workers=4, gpus_per_worker=1)
    assert argv[-4:] == ["--num-workers", "4", "--gpus-per-worker", "1"]


def test_sizes_stay_within_the_template(resnet):
    assert resnet.size(None, None) == (2, 1)
    assert resnet.size(16, 0) == (16, 0)
    with pytest.raises(BadRequest, match="--workers 17: template resnet allows 1 to 16"):
        resnet.size(17, None)
    with pytest.raises(BadRequest, match="--workers 0"):
        resnet.size(0, None)
    with pytest.raises(BadRequest, match="--gpus 9"):
        resnet.size(None, 9)


def test_only_the_allowed_may_launch(resnet):
    nobody_named = People()
    resnet.authorize("alice", nobody_named)
    with pytest.raises(Forbidden, match="bob may not run template resnet; ask one of: U024BE7LH, alice"):
        resnet.authorize("bob", nobody_named)
    TINY_TRANSFORMER.authorize("anyone", nobody_named)


def test_the_allowed_are_the_same_people_by_name_or_by_slack_id(resnet):
    """allowed: [alice, U024BE7LH]; carol is U024BE7LH, alice is U01ALICE: each may launch by either spelling."""
    people = People({"alice": "U01ALICE", "carol": "U024BE7LH"})
    for who in ("alice", "U01ALICE", "carol", "U024BE7LH"):
        resnet.authorize(who, people)
    with pytest.raises(Forbidden, match=r"^bob may not run template resnet; ask one of: alice, carol$"):
        resnet.authorize("U02BOB", People({"bob": "U02BOB", "carol": "U024BE7LH"}))


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"params": {}}, "needs an `entrypoint`"),
        ({"entrypoint": ["x"], "params": {"s": {"type": "str"}}}, "needs a `pattern`"),
        ({"entrypoint": ["x"], "params": {"c": {"type": "choice"}}}, "needs `choices`"),
        ({"entrypoint": ["x"], "params": {"n": {"type": "int", "default": 500, "max": 10}}}, "above the maximum"),
        ({"entrypoint": ["x"], "workers": {"default": 9, "max": 4}}, "default 9 is above max 4"),
        ({"entrypoint": ["x"], "memory_per_worker": "lots"}, "memory_per_worker"),
        ({"entrypoint": ["x"], "colour": "red"}, "colour"),
    ],
)
def test_a_bad_configured_template_names_its_field(body, problem):
    with pytest.raises(BadRequest, match=r"templates\.broken in the config is invalid: .*" + problem.replace("`", ".")):
        load_templates({"broken": body})


def test_unknown_template_lists_the_known_ones():
    with pytest.raises(NotFound, match="no template 'nope'; known templates: tiny-transformer"):
        find_template(load_templates({}), "nope")


def test_a_manifest_template_takes_free_but_plain_values():
    template = manifest_template("rayjob-sample")
    assert template.parse_params(["epochs=3", "data=s3://bucket/x"]) == {"epochs": "3", "data": "s3://bucket/x"}
    for value in HOSTILE:
        with pytest.raises(BadRequest, match=r"^parameter epochs:"):
            template.parse_params([f"epochs={value}"])


def test_the_built_in_template_and_the_trainer_agree_on_parameters_and_defaults():
    # workloads/ may not import actions/, so the trainer keeps its own copy; this keeps them equal.
    trainer = {field.name: field.default for field in dataclasses.fields(TrainConfig)}
    template = {name: param.default for name, param in TINY_TRANSFORMER.params.items()}
    assert template == trainer

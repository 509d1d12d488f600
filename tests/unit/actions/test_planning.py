"""Planning a launch or a sweep: names, argv, search spaces, and the refusals a person can fix."""

import json
import re
import shlex

import pytest

from actions.errors import BadRequest, NotFound
from actions.jobs.job import DNS_1035, MANAGED_BY, MAX_JOB_NAME, label_value, new_job_name
from actions.jobs.planning import plan_job
from actions.jobs.requests import LaunchRequest, ManifestText, SweepOptions
from actions.jobs.search_space import parse_space
from actions.jobs.templates import TINY_TRANSFORMER
from actions.settings import Settings


@pytest.fixture
def default_settings(tmp_path):
    """The defaults, in the test's folder."""
    return Settings(data_dir=tmp_path)


def plan_launch(settings, template, words, **request):
    return plan_job(settings, LaunchRequest(template=template, params=tuple(words), **request))


def plan_sweep(settings, template, words, options, **request):
    return plan_job(settings, LaunchRequest(template=template, params=tuple(words), sweep=options, **request))


def test_a_launch_has_a_fresh_dns_1035_name_and_our_labels(default_settings):
    first = plan_launch(default_settings, "tiny-transformer", ["lr=0.01"], requester="U024BE7LH")
    second = plan_launch(default_settings, "tiny-transformer", ["lr=0.01"], requester="U024BE7LH")
    assert first.name != second.name
    assert DNS_1035.match(first.name) and len(first.name) <= MAX_JOB_NAME
    assert first.labels[MANAGED_BY] == "trainbot"
    assert first.labels["trainbot.dev/template"] == "tiny-transformer"
    assert first.labels["trainbot.dev/requester"] == "U024BE7LH"


def test_the_entrypoint_is_the_argv_joined_by_shlex(default_settings):
    launch = plan_launch(default_settings, "tiny-transformer", ["lr=0.01", "strategy=fsdp"], requester="a", workers=4)
    assert shlex.split(launch.entrypoint) == launch.argv
    assert launch.argv[:3] == ["python", "-m", "workloads.tiny_transformer"]
    assert launch.argv[launch.argv.index("--lr") + 1] == "0.01"
    assert launch.argv[launch.argv.index("--num-workers") + 1] == "4"
    assert launch.runtime_env()["env_vars"]["TRAINBOT_JOB"] == launch.name


@pytest.mark.parametrize("prefix", ["x" * 200, "Ünïcode Template!", "9-lives", "---", "a--b"])
def test_names_stay_dns_1035_whatever_the_prefix(prefix):
    name = new_job_name(prefix)
    assert DNS_1035.match(name), name
    assert len(name) <= MAX_JOB_NAME


@pytest.mark.parametrize("requester", ["alice@example.com", "Ünïcode user", "x" * 100, "<@U1|bob>", "..."])
def test_any_requester_becomes_a_valid_label_value(requester):
    value = label_value(requester)
    assert re.fullmatch(r"([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]", value), value


def test_a_sweep_space_is_typed_and_bounded():
    space = parse_space(
        TINY_TRANSFORMER, ["lr=loguniform(1e-4, 1e-2)", "layers=randint(1,4)", "strategy=choice(ddp,fsdp)", "epochs=3"]
    )
    assert space["lr"] == {"loguniform": [1e-4, 1e-2]}
    assert space["layers"] == {"randint": [1, 4]}
    assert space["strategy"] == {"choice": ["ddp", "fsdp"]}
    assert space["epochs"] == 3
    assert space["batch_size"] == TINY_TRANSFORMER.params["batch_size"].default


@pytest.mark.parametrize(
    ("word", "message"),
    [
        ("seed=loguniform(0,5)", "seed: loguniform needs bounds above 0"),
        ("lr=uniform(0.1)", "lr: uniform takes two bounds"),
        ("lr=uniform(0.5,0.1)", "needs the low bound first"),
        ("lr=uniform(0.1,5)", "lr: 5.0 is above the maximum 1"),
        ("lr=uniform(0.1,$(id))", "lr: '\\$\\(id\\)' is not a number"),
        ("strategy=uniform(1,2)", "strategy: uniform\\(...\\) needs a number parameter"),
        ("strategy=choice(ddp,zero3)", "strategy: 'zero3' is not one of ddp, fsdp"),
        ("lr=randint(1,2)", "lr: randint needs an int parameter"),
        ("momentum=choice(1,2)", "unknown parameter 'momentum'"),
        ("lr=gaussian(1,2)", "lr: 'gaussian\\(1,2\\)' is not a number"),
    ],
)
def test_bad_spaces_name_the_parameter(word, message):
    with pytest.raises(BadRequest, match=message):
        parse_space(TINY_TRANSFORMER, [word])


def test_a_sweep_launch_runs_the_driver_with_the_space_as_one_word(default_settings):
    options = SweepOptions(trials=10, scheduler="asha")
    launch = plan_sweep(
        default_settings, "tiny-transformer", ["lr=loguniform(1e-4,1e-2)"], options, requester="a", backend="local"
    )
    argv = shlex.split(launch.entrypoint)
    assert argv[:3] == ["python", "-m", "workloads.sweep"]
    assert json.loads(argv[argv.index("--space") + 1])["lr"] == {"loguniform": [1e-4, 1e-2]}
    assert argv[argv.index("--trials") + 1] == "10"
    assert argv[argv.index("--scheduler") + 1] == "asha"
    assert argv[argv.index("--metric") + 1] == "val_loss"
    assert argv[argv.index("--tracking-uri") + 1] == default_settings.tracking_uri()
    assert argv[argv.index("--sweep-id") + 1] == launch.name
    assert launch.kind == "sweep"


@pytest.mark.parametrize(
    ("words", "options", "backend", "message"),
    [
        (["epochs=3"], SweepOptions(trials=10), "local", "nothing to search"),
        (["lr=uniform(0.1,0.2)"], SweepOptions(trials=0), "local", "--trials 0"),
        (["lr=uniform(0.1,0.2)"], SweepOptions(trials=10), "kuberay", "TRAINBOT_MLFLOW_TRACKING_URI"),
    ],
)
def test_sweeps_refuse_what_cannot_run(default_settings, words, options, backend, message):
    with pytest.raises(BadRequest, match=message):
        plan_sweep(default_settings, "tiny-transformer", words, options, requester="a", backend=backend)


TEAM_RAYJOB = ManifestText(
    """
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: Team-Job}
spec:
  entrypoint: python train.py
  rayClusterSpec:
    workerGroupSpecs: [{groupName: workers, replicas: 3, template: {spec: {containers: []}}}]
""",
    "team.yaml",
)


def test_a_manifest_request_keeps_its_size_and_runs_on_kuberay(default_settings):
    request = LaunchRequest(template=None, params=("epochs=3",), requester="a", manifest=TEAM_RAYJOB)
    launch = plan_job(default_settings, request)
    assert (launch.template.name, launch.workers, launch.argv) == ("team-job", 3, ["--epochs", "3"])
    assert request.backend_name("local") == "kuberay"


def test_a_manifest_request_for_the_local_backend_is_refused():
    with pytest.raises(BadRequest, match="a RayJob manifest runs on KubeRay; drop --backend local"):
        LaunchRequest(template=None, params=(), requester="a", backend="local", manifest=TEAM_RAYJOB)


def test_a_launch_names_its_template_first(default_settings):
    with pytest.raises(BadRequest, match="name a template first"):
        plan_job(default_settings, LaunchRequest(template="lr=0.1", params=(), requester="a"))


def test_a_sweep_takes_its_first_word_for_its_template(default_settings):
    with pytest.raises(NotFound, match=r"no template 'lr=uniform\(0.1,0.2\)'; known templates: tiny-transformer"):
        plan_sweep(default_settings, "lr=uniform(0.1,0.2)", [], SweepOptions(trials=2), requester="a")

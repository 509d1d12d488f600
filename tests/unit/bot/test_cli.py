"""The real `trainbot` console script: exit codes, JSON shape, one-line errors."""

import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import kmock
import pytest
import yaml

from actions.jobs.backends.kuberay import KubeRayBackend
from actions.jobs.job import DNS_1035
from actions.settings import Settings
from diagnosers.findings import FINDING_IDS
from tests.builders.kuberay_launches import RUNNING, launch_of
from tests.paths import DOCS, EXAMPLES, TRAINBOT
from tests.servers.processes import free_port
from tests.standins.crd_schema import RAYJOB, SAMPLES_DIR, problems, require_crd
from tests.standins.kube_standin import ServedStandin


def run(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    return subprocess.run(
        [str(TRAINBOT), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
        cwd=cwd,
        check=False,
    )


def test_json_output_is_exactly_the_bundle_md_shape():
    result = run("diagnose", str(EXAMPLES / "failed-gpu-oom"), "--json")
    assert result.returncode == 0, result.stderr
    diagnosis = json.loads(result.stdout)
    assert set(diagnosis) == {"verdict", "summary", "findings", "sources"}
    assert diagnosis["verdict"] == "failed"
    for found in diagnosis["findings"]:
        assert set(found) == {"id", "severity", "confidence", "title", "detail", "evidence", "runbook"}
        assert found["id"] in FINDING_IDS
        assert found["severity"] in ("critical", "warning", "info")
        assert 0.0 <= found["confidence"] <= 1.0
        assert found["runbook"] == f"playbooks/{found['id']}.md"
        for quote in found["evidence"]:
            assert set(quote) == {"source", "line", "text"}
            assert isinstance(quote["line"], int)


def test_diagnose_help_points_at_the_bundle_doc_that_ships_with_every_finding_id():
    result = run("diagnose", "--help")
    assert result.returncode == 0
    assert "docs/bundle.md in trainbot's source" in result.stdout
    assert "BUNDLE.md" not in result.stdout  # the spec, which the project does not ship
    documented = re.findall(r"^\| `([a-z-]+)` \|", (DOCS / "bundle.md").read_text(), re.MULTILINE)
    assert sorted(documented) == sorted(FINDING_IDS)


def test_text_output_names_verdict_runbook_and_evidence():
    result = run("diagnose", str(EXAMPLES / "failed-gpu-oom"))
    assert result.returncode == 0
    assert result.stdout.startswith("verdict: failed")
    assert "runbook: playbooks/gpu-oom.md" in result.stdout
    assert "> logs/worker-1.log:13: " in result.stdout


@pytest.mark.parametrize("target", ["/nonexistent/bundle", "/etc/hostname", "/"])
def test_not_a_bundle_exits_2_with_one_line_and_no_traceback(target):
    result = run("diagnose", target)
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_bad_config_file_is_one_line_saying_which_file(tmp_path):
    config = tmp_path / "trainbot.yaml"
    config.write_text("data_dir: [unclosed\n")
    result = run("config", env={"TRAINBOT_CONFIG": str(config)})
    assert result.returncode == 2
    assert str(config) in result.stderr and "Traceback" not in result.stderr


def test_config_layers_environment_over_yaml(tmp_path):
    config = tmp_path / "trainbot.yaml"
    config.write_text("data_dir: /from/yaml\nlog_level: DEBUG\n")
    result = run("config", env={"TRAINBOT_CONFIG": str(config), "TRAINBOT_LOG_LEVEL": "WARNING"})
    settings = json.loads(result.stdout)
    assert (settings["data_dir"], settings["log_level"]) == ("/from/yaml", "WARNING")


def test_config_never_prints_a_secret():
    secrets = {
        "TRAINBOT_PROMETHEUS_TOKEN": "prom-token-value",
        "TRAINBOT_RAY_DASHBOARD_TOKEN": "ray-token-value",
        "TRAINBOT_MLFLOW_WEBHOOK_SECRET": "webhook-secret-value",
    }
    result = run("config", env=secrets)
    assert result.returncode == 0, result.stderr
    assert not [value for value in secrets.values() if value in result.stdout]
    assert json.loads(result.stdout)["prometheus_token"] == "**********"


def test_config_says_which_data_directory_and_why(tmp_path):
    below = tmp_path / "checkout" / "bot"
    below.mkdir(parents=True)
    per_user = {"XDG_DATA_HOME": str(tmp_path / "xdg")}

    def chosen(env: dict[str, str]) -> tuple[str, str]:
        shown = json.loads(run("config", env={**per_user, **env}, cwd=below).stdout)
        return shown["data_dir"], shown["data_dir_chosen_by"]

    assert chosen({}) == (str(tmp_path / "xdg" / "trainbot"), "per-user default")
    (tmp_path / "checkout" / ".trainbot").mkdir()
    assert chosen({}) == (str(tmp_path / "checkout" / ".trainbot"), f"found .trainbot in {tmp_path / 'checkout'}")
    assert chosen({"TRAINBOT_DATA_DIR": "/named"}) == ("/named", "TRAINBOT_DATA_DIR")


def test_stop_with_no_head_says_so_in_one_line_and_exits_0(tmp_path):
    result = run("stop", env={"TRAINBOT_DATA_DIR": str(tmp_path)})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"no local Ray head of {tmp_path} is running; nothing to stop\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["diagnose", str(EXAMPLES / "compute-bound")],
        ["launch", "tiny-transformer", "--dry-run"],
        ["launch", "tiny-transformer", "--backend", "kuberay", "--dry-run"],
        ["sweep", "tiny-transformer", "--trials", "2", "lr=uniform(0.001,0.01)", "--dry-run"],
    ],
    ids=["diagnose", "launch-local", "launch-kuberay", "sweep"],
)
def test_the_bot_side_never_imports_torch_or_ray_train(argv):
    code = (
        "import sys, json; from bot.cli.main import main; main(json.loads(sys.argv[1])); "
        "from actions.jobs.backends.local import LocalBackend; "
        "from actions.jobs.backends.kuberay import KubeRayBackend; "
        "from actions.jobs.service import Jobs; import ray.job_submission; "
        "heavy = [m for m in sys.modules if m.split('.')[0] == 'torch' or m.startswith(('ray.train', 'ray.tune'))]; "
        "assert not heavy, heavy"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_a_kuberay_dry_run_prints_a_rayjob_the_crd_accepts(tmp_path):
    result = run(
        "launch", "tiny-transformer", "lr=0.01", "--workers", "4", "--gpus", "1",
        "--backend", "kuberay", "--dry-run", "-o", "yaml",
        env={"TRAINBOT_DATA_DIR": str(tmp_path / "data")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rayjob = yaml.safe_load(result.stdout)
    assert rayjob["kind"] == "RayJob"
    workers = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert workers["replicas"] == 4
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert not (tmp_path / "data").exists(), "a dry run must leave nothing behind"
    assert problems(require_crd(RAYJOB), rayjob) == []


def test_a_shared_sample_manifest_launches_dry_with_our_words_appended():
    sample = SAMPLES_DIR / "ray-job.pytorch-mnist.yaml"
    if not sample.is_file():
        pytest.skip(f"{sample} is absent: the KubeRay samples come with the shared checkout beside the repo")
    result = run("launch", "--manifest", str(sample), "epochs=3", "--dry-run", "-o", "json")
    assert result.returncode == 0, result.stderr
    rayjob = json.loads(result.stdout)
    assert rayjob["spec"]["entrypoint"].endswith(" --epochs 3")
    assert rayjob["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "trainbot"
    assert problems(require_crd(RAYJOB), rayjob) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["launch", "tiny-transformer", "lr=1;reboot", "--dry-run"], "parameter lr: '1;reboot' is not a number"),
        (["launch", "tiny-transformer", "batch_size=`id`", "--dry-run"], "parameter batch_size: '`id`' is not an"),
        (["launch", "nope", "--dry-run"], "no template 'nope'; known templates: tiny-transformer"),
        (["launch", "lr=0.1", "--dry-run"], "name a template first"),
        (["launch", "--manifest", "/nonexistent.yaml", "--dry-run"], "/nonexistent.yaml: cannot read it"),
        (["sweep", "tiny-transformer", "--trials", "3", "lr=0.1", "--dry-run"], "nothing to search"),
    ],
)
def test_launch_mistakes_exit_2_with_one_line(args, message):
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.startswith(f"trainbot: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args", [("launch", "tiny-transformer", "--dry-run"), ("jobs",)])
def test_an_unknown_trainbot_backend_is_one_line_naming_the_backends(tmp_path, args):
    result = run(*args, env={"TRAINBOT_BACKEND": "slurm", "TRAINBOT_DATA_DIR": str(tmp_path / "data")})
    assert result.returncode == 2
    assert result.stderr.startswith("trainbot: invalid settings (backend: Input should be 'local' or 'kuberay')")
    assert len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "data").exists()


def test_a_kuberay_sweep_dry_run_is_one_rayjob_running_the_driver():
    result = run(
        "sweep", "tiny-transformer", "--trials", "10", "lr=loguniform(1e-4,1e-2)",
        "--backend", "kuberay", "--dry-run", "-o", "json",
        env={"TRAINBOT_MLFLOW_TRACKING_URI": "http://mlflow.ml.svc:5000"},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rayjob = json.loads(result.stdout)
    argv = shlex.split(rayjob["spec"]["entrypoint"])
    assert argv[:3] == ["python", "-m", "workloads.sweep"]
    assert argv[argv.index("--tracking-uri") + 1] == "http://mlflow.ml.svc:5000"
    assert rayjob["metadata"]["labels"]["trainbot.dev/kind"] == "sweep"
    assert problems(require_crd(RAYJOB), rayjob) == []


def test_status_of_an_unknown_job_with_no_ray_head_names_the_job_in_one_line(tmp_path):
    port = free_port()  # nothing listens there: no head of anyone's answers
    env = {"TRAINBOT_DATA_DIR": str(tmp_path / "data"), "TRAINBOT_LOCAL_DASHBOARD_PORT": str(port)}
    result = run("status", "nosuchjob-x1", env=env)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"trainbot: no local Ray head answers at http://127.0.0.1:{port}, so it has no job 'nosuchjob-x1'; "
        "`trainbot jobs` lists what was launched, and a launch starts the head\n"
    )


def test_status_with_no_head_of_this_data_directory_names_the_directory(tmp_path):
    result = run("status", "nosuchjob-x1", env={"TRAINBOT_DATA_DIR": str(tmp_path)})
    assert result.stderr == (
        f"trainbot: no local Ray head answers for the data directory {tmp_path}, so it has no job 'nosuchjob-x1'; "
        "`trainbot jobs` lists what was launched, and a launch starts the head\n"
    )


def kuberay_env(standin: ServedStandin, tmp_path: Path) -> dict[str, str]:
    """The environment of a `trainbot` that talks to the KubeRay stand-in through a kubeconfig naming it."""
    return {
        "KUBECONFIG": str(standin.kubeconfig(tmp_path / "kubeconfig")),
        "TRAINBOT_BACKEND": "kuberay",
        "TRAINBOT_NAMESPACE": "default",
        "TRAINBOT_DATA_DIR": str(tmp_path / "data"),
    }


def test_cancel_of_a_finished_job_says_it_had_already_ended_and_deletes_nothing(tmp_path):
    with ServedStandin() as standin:
        env = kuberay_env(standin, tmp_path)
        finished, running = launch_of(), launch_of()
        backend = KubeRayBackend(Settings(data_dir=tmp_path, namespace="default"), standin.api_client())
        for launch in (finished, running):
            backend.submit(launch)
        standin.set_status(finished.name, {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete"})
        standin.set_status(running.name, RUNNING)

        said = run("cancel", finished.name, env=env)
        assert (said.returncode, said.stdout, said.stderr) == (
            0,
            f"{finished.name}: already SUCCEEDED; nothing to stop\n",
            "",
        )
        as_json = json.loads(run("cancel", finished.name, "-o", "json", env=env).stdout)
        assert (as_json["name"], as_json["state"], as_json["action"], as_json["requested"]) == (
            finished.name, "SUCCEEDED", "stop", False
        )  # fmt: skip
        assert standin.rayjob(finished.name) is not None
        assert not list(standin.api[kmock.action.DELETE])

        stopped = run("cancel", running.name, env=env)
        assert (stopped.returncode, stopped.stdout) == (0, f"{running.name}: STOPPED (stop requested)\n")
        assert standin.rayjob(running.name) is None


def test_output_name_prints_only_a_fresh_job_name():
    first = run("launch", "tiny-transformer", "--dry-run", "-o", "name")
    second = run("launch", "tiny-transformer", "--dry-run", "-o", "name")
    assert first.returncode == 0, first.stderr
    assert DNS_1035.match(first.stdout.strip()) and first.stdout.count("\n") == 1
    assert first.stdout != second.stdout


def test_config_masks_the_credentials_inside_urls():
    urls = {
        "TRAINBOT_STATE_STORE_URL": "postgresql+psycopg://trainbot:pg-password-value@db:5432/trainbot?sslmode=require",
        "TRAINBOT_MLFLOW_TRACKING_URI": "https://ml:mlflow-password-value@mlflow.internal:5000",
        "TRAINBOT_PROMETHEUS_URL": "https://prometheus.internal/api?access_token=prom-query-token&dedup=true",
        "TRAINBOT_ALERTMANAGER_URL": "http://am:am-password-value@alertmanager:9093",
    }
    result = run("config", env=urls)
    assert result.returncode == 0, result.stderr
    assert not [
        secret for secret in ("pg-password", "mlflow-password", "prom-query", "am-password") if secret in result.stdout
    ]
    shown = json.loads(result.stdout)
    assert shown["state_store_url"] == "postgresql+psycopg://trainbot:***@db:5432/trainbot?sslmode=require"
    assert shown["mlflow_tracking_uri"] == "https://ml:***@mlflow.internal:5000"
    assert shown["prometheus_url"] == "https://prometheus.internal/api?access_token=***&dedup=true"
    assert shown["alertmanager_url"] == "http://am:***@alertmanager:9093"


def modes(root: Path) -> dict[str, int]:
    """The permission bits of `root` and of everything under it, by path relative to it."""
    return {str(path.relative_to(root)): path.stat().st_mode & 0o777 for path in [root, *root.rglob("*")]}


def run_with_umask_022(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**clean, **env}, check=False,
        preexec_fn=lambda: os.umask(0o022),
    )  # fmt: skip


@pytest.mark.parametrize("existing", [False, True])
def test_the_data_directory_and_its_files_are_private(tmp_path, existing):
    data = tmp_path / "data"
    if existing:  # as an older trainbot left it
        data.mkdir(mode=0o755)
        data.chmod(0o755)
    result = run_with_umask_022([str(TRAINBOT), "jobs"], {"TRAINBOT_DATA_DIR": str(data)})
    assert result.returncode == 0, result.stderr
    found = modes(data)
    assert "state.db" in found
    assert found == {path: 0o700 if (data / path).is_dir() else 0o600 for path in found}


CRASHING_CLI = """
import sys
import tempfile
from actions.jobs.service import Jobs
from bot.cli.main import main

def crash(*args, **kwargs):
    raise RuntimeError("the traceback of a bug, with secret-looking-detail")

Jobs.list = crash
sys.exit(main(["jobs"]))
"""


def test_an_incident_report_is_private_in_the_data_directory(tmp_path):
    data = tmp_path / "data"
    before = set(Path(tempfile.gettempdir()).glob("trainbot-error-*"))
    result = run_with_umask_022([sys.executable, "-c", CRASHING_CLI], {"TRAINBOT_DATA_DIR": str(data)})
    assert result.returncode == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("trainbot: unexpected error, incident ") and "Traceback" not in line
    [report] = (data / "incidents").iterdir()
    assert str(report) in line
    assert "secret-looking-detail" in report.read_text(encoding="utf-8")
    assert (modes(data / "incidents"), report.stat().st_mode & 0o777) == ({".": 0o700, report.name: 0o600}, 0o600)
    assert set(Path(tempfile.gettempdir()).glob("trainbot-error-*")) == before


def test_diagnose_starts_without_pydantic_yet_a_bundle_limit_set_in_the_environment_holds():
    code = (
        "import sys, json; from bot.cli.main import main; code = main(json.loads(sys.argv[1])); "
        "assert not [m for m in sys.modules if m.startswith('pydantic')]; sys.exit(code)"
    )
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    argv = json.dumps(["diagnose", str(EXAMPLES / "failed-gpu-oom"), "--json"])
    started = subprocess.run(
        [sys.executable, "-c", code, argv], capture_output=True, text=True, timeout=120, env=clean, check=False
    )
    assert started.returncode == 0, started.stderr
    refused = run("diagnose", str(EXAMPLES / "failed-gpu-oom"), env={"TRAINBOT_BUNDLE_DEADLINE_S": "0"})
    assert refused.returncode == 2 and "bundle_deadline_s" in refused.stderr

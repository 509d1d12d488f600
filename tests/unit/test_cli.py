"""The real `trainbot` console script: exit codes, JSON shape, one-line errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from diagnosers.findings import FINDING_IDS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "bundles"
TRAINBOT = Path(sys.executable).with_name("trainbot")


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {key: value for key, value in os.environ.items() if not key.startswith("TRAINBOT_")}
    return subprocess.run(
        [str(TRAINBOT), *args], capture_output=True, text=True, timeout=120, env={**clean, **(env or {})}, check=False
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


def test_default_data_dir_is_dot_trainbot():
    result = run("config")
    assert json.loads(result.stdout)["data_dir"] == ".trainbot"


def test_diagnose_does_not_import_torch_or_ray_train():
    code = (
        "import sys; from bot.cli import main; main(['diagnose', sys.argv[1]]); "
        "assert 'torch' not in sys.modules and 'ray.train' not in sys.modules, 'heavy import'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(EXAMPLES / "compute-bound")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr

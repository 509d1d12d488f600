"""`trainbot diagnose JOB` and `trainbot collect JOB` on the local backend: a real Ray head, real jobs."""

from __future__ import annotations

import json
import tarfile

import pytest

from actions.jobs.backends.local_head import temp_dir
from tests.integration.cli import launch, trainbot, wait_for
from tests.servers.prometheus_server import missing_binaries, running_prometheus

pytestmark = pytest.mark.integration


def diagnosis_of(ray_env: dict[str, str], target: str) -> dict:
    return json.loads(trainbot(ray_env, "diagnose", target, "--json").stdout)


def test_a_finished_job_is_diagnosed_live_and_the_saved_bundle_says_the_same(ray_env, tmp_path):
    job = launch(ray_env, "launch", "tiny-transformer", "epochs=1", "steps_per_epoch=8", "--workers", "2")
    finished = trainbot(ray_env, "status", job, "--wait", "-o", "json")
    assert json.loads(finished.stdout)["state"] == "SUCCEEDED"

    live = diagnosis_of(ray_env, job)
    # Every file the collectors wrote is read (no per-file notes), and a local job has no Kubernetes.
    assert live["sources"] == {
        "ray": "ok",
        "logs": "ok",
        "steps": "ok",
        "prometheus": "not-configured",
        "k8s": "not-configured",
    }
    assert live["verdict"] != "failed"

    saved = tmp_path / f"{job}.tar.gz"
    collected = trainbot(ray_env, "collect", job[:-3], "-o", str(saved))
    assert collected.stdout.startswith(f"{saved}: ")
    with tarfile.open(saved) as archive:
        names = archive.getnames()
    assert any(name.endswith("steps/rank-0.jsonl") for name in names)
    assert any(name.endswith("steps/rank-1.jsonl") for name in names)
    assert any(name.endswith(f"logs/job-driver-{job}.log") for name in names)
    offline = diagnosis_of(ray_env, str(saved))
    assert (offline["verdict"], [f["id"] for f in offline["findings"]]) == (
        live["verdict"],
        [f["id"] for f in live["findings"]],
    )


def test_a_failing_job_is_diagnosed_as_failed_with_its_traceback_quoted(ray_env, tmp_path):
    # A team template whose script really fails: a shape mismatch inside torch.
    config = tmp_path / "trainbot.yaml"
    config.write_text(
        "templates:\n  broken:\n    entrypoint: [python, -c, 'import torch; torch.zeros(2, 3) @ torch.zeros(2, 3)']\n"
    )
    env = {**ray_env, "TRAINBOT_CONFIG": str(config)}
    job = launch(env, "launch", "broken")
    finished = trainbot(env, "status", job, "--wait", "-o", "json", check=False)
    assert (finished.returncode, json.loads(finished.stdout)["state"]) == (1, "FAILED")
    diagnosis = diagnosis_of(env, job)
    assert diagnosis["verdict"] == "failed"
    quoted = [quote["text"] for finding in diagnosis["findings"] for quote in finding["evidence"]]
    assert any("mat1 and mat2 shapes cannot be multiplied" in text for text in quoted), diagnosis


def test_collect_refuses_to_overwrite_and_unknown_jobs_say_how_to_list(ray_env, tmp_path):
    existing = tmp_path / "bundle.tar.gz"
    existing.write_bytes(b"keep me")
    refused = trainbot(ray_env, "collect", "anything", "-o", str(existing), check=False)
    assert refused.returncode == 2
    assert "exists already" in refused.stderr
    assert existing.read_bytes() == b"keep me"
    unknown = trainbot(ray_env, "diagnose", "no-such-job-42", check=False)
    assert unknown.returncode == 2
    assert "trainbot jobs" in unknown.stderr


def test_a_live_job_with_prometheus_scraping_ray_gets_its_node_metrics(ray_env, ray_settings, tmp_path):
    if reason := missing_binaries():
        pytest.skip(reason)
    # Prometheus scrapes the Ray head's own metrics through the service discovery file Ray writes.
    discovery = temp_dir(ray_settings) / "prom_metrics_service_discovery.json"
    file_sd = f"[{{files: ['{discovery}'], refresh_interval: 1s}}]"
    scrape = f"[{{job_name: ray, scrape_interval: 1s, file_sd_configs: {file_sd}}}]"
    with running_prometheus(tmp_path / "tsdb", scrape_configs=scrape) as prometheus:
        env = {**ray_env, "TRAINBOT_PROMETHEUS_URL": prometheus}
        job = launch(env, "launch", "tiny-transformer", "epochs=2", "steps_per_epoch=10", "--workers", "2")
        assert wait_for(env, job, {"SUCCEEDED", "FAILED"})["state"] == "SUCCEEDED"
        bundle = tmp_path / "bundle"
        trainbot(env, "collect", job, "-o", str(bundle))
    sources = json.loads((bundle / "bundle.json").read_text())["sources"]
    assert sources["prometheus"] == "ok", sources
    collected = {path.stem for path in (bundle / "prometheus").glob("*.json")}
    assert "ray_node_cpu_utilization" in collected, collected
    matrix = json.loads((bundle / "prometheus" / "ray_node_cpu_utilization.json").read_text())
    assert matrix["status"] == "success"
    assert matrix["data"]["result"], "no series for this job's host"

"""The training alerts (deploy/kustomize/base/prometheusrule.yaml) and the Alertmanager route to trainbot:
promtool checks the groups and runs their unit tests (each alert fires on a small series, its near-miss does
not), every alert carries the labels trainbot threads by and a runbook, and amtool routes them to the bot."""

import re
import shutil
from urllib.parse import urlsplit

import pytest
import yaml

from actions.settings import Settings
from bot.web.app import ALERTS_PATH
from diagnosers.findings import FINDING_IDS, Severity
from tests.builders.deploy import (
    BASE,
    KUSTOMIZE,
    PLAYBOOKS,
    RECEIVER,
    RULE_TESTS,
    RUNBOOK_PLACEHOLDER,
    alerting_rules,
    load_yaml,
    rule_groups,
    run_tool,
)

# The alerts the deployment promises, and the finding whose runbook each links.
ALERT_FINDINGS = {
    "RayJobGPUUtilizationLow": "io-bound",
    "RayJobCommunicationBound": "comm-bound",
    "GPUXidError": "xid-error",
    "RayJobGPUMemoryNearlyFull": "gpu-oom",
    "RayJobFailed": "worker-died",
    "RayJobPodsPendingForGPUs": "insufficient-gpu",
}
DCGM_METRICS = {
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
}
# The label the Alertmanager route picks trainbot's alerts by.
ROUTE_LABEL = ("trainbot", "true")


@pytest.fixture
def rule_files(tmp_path):
    """The groups as a Prometheus rule file, beside a copy of the promtool unit tests that load it."""
    rules = yaml.safe_dump({"groups": rule_groups()}, sort_keys=False)
    (tmp_path / "trainbot-rules.yaml").write_text(rules, encoding="utf-8")
    shutil.copy(RULE_TESTS, tmp_path / RULE_TESTS.name)
    return tmp_path


def test_promtool_accepts_the_groups(rule_files):
    done = run_tool("promtool", "check", "rules", rule_files / "trainbot-rules.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_each_alert_fires_on_its_series_and_not_on_its_near_miss(rule_files):
    done = run_tool("promtool", "test", "rules", RULE_TESTS.name, cwd=rule_files)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_unit_tests_cover_every_alert_with_the_thread_labels():
    fired: dict[str, list[dict]] = {}
    for case in load_yaml(RULE_TESTS)["tests"]:
        for check in case["alert_rule_test"]:
            fired.setdefault(check["alertname"], []).extend(check.get("exp_alerts") or [])
    assert set(fired) == set(ALERT_FINDINGS)
    for name, alerts in fired.items():
        assert any({"namespace", "rayjob"} <= set(alert["exp_labels"]) for alert in alerts), name


def test_the_promised_alerts_link_the_runbook_of_their_finding():
    links = {rule["alert"]: rule["annotations"]["runbook_url"] for rule in alerting_rules(rule_groups())}
    assert links == {name: f"{RUNBOOK_PLACEHOLDER}/{finding}.md" for name, finding in ALERT_FINDINGS.items()}
    for finding in ALERT_FINDINGS.values():
        assert finding in FINDING_IDS
        assert (PLAYBOOKS / f"{finding}.md").is_file()


def test_every_alert_has_a_severity_the_route_label_and_words_for_a_person():
    for rule in alerting_rules(rule_groups()):
        labels, annotations = rule["labels"], rule["annotations"]
        assert labels["severity"] in set(Severity), rule["alert"]
        assert labels[ROUTE_LABEL[0]] == ROUTE_LABEL[1], rule["alert"]
        assert {"summary", "description", "runbook_url"} <= set(annotations), rule["alert"]


def test_each_case_feeds_scrape_labels_that_its_exact_labels_prove_dropped():
    """promtool compares labels exactly: a scrape `job` label leaking into an alert (where it would name the
    thread: trainbot takes `job` when there is no `rayjob`) fails the case that fed one."""
    for case in load_yaml(RULE_TESTS)["tests"]:
        assert any('job="' in series["series"] for series in case["input_series"]), case["name"]


def test_the_rules_read_the_dcgm_exporter_metrics():
    expressions = " ".join(rule["expr"] for group in rule_groups() for rule in group["rules"])
    used = set(re.findall(r"\bDCGM_FI_\w+", expressions))
    assert used >= DCGM_METRICS


def test_the_base_leaves_the_runbook_base_to_the_overlays():
    components = load_yaml(KUSTOMIZE / "components" / "runbook-urls" / "kustomization.yaml")
    (replacement,) = components["replacements"]
    assert replacement["source"]["fieldPath"] == "data.TRAINBOT_RUNBOOK_BASE_URL"
    base = load_yaml(BASE / "kustomization.yaml")
    (env,) = [generator for generator in base["configMapGenerator"] if generator["name"] == "trainbot-env"]
    assert f"TRAINBOT_RUNBOOK_BASE_URL={RUNBOOK_PLACEHOLDER}" in env["literals"]


# The Alertmanager receiver.


def test_amtool_accepts_the_receiver_config():
    done = run_tool("amtool", "check-config", RECEIVER)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("labels", "receiver"),
    [
        ([f"{ROUTE_LABEL[0]}={ROUTE_LABEL[1]}", "alertname=RayJobFailed", "namespace=ml", "rayjob=llm-ft"], "trainbot"),
        (["alertname=KubePodCrashLooping", "namespace=ml"], "default"),
    ],
)
def test_the_training_alerts_and_only_they_reach_trainbot(labels, receiver):
    done = run_tool("amtool", "config", "routes", "test", f"--config.file={RECEIVER}", *labels)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == [receiver]


def test_the_receiver_posts_to_the_bots_webhook_grouped_as_trainbot_threads():
    config = load_yaml(RECEIVER)
    (route,) = config["route"]["routes"]
    assert route["matchers"] == [f'{ROUTE_LABEL[0]}="{ROUTE_LABEL[1]}"']
    assert route["group_by"] == Settings().alert_thread_labels
    (trainbot,) = [receiver for receiver in config["receivers"] if receiver["name"] == route["receiver"]]
    (webhook,) = trainbot["webhook_configs"]
    assert webhook["send_resolved"] is True
    url = urlsplit(webhook["url"])
    service = load_yaml(BASE / "service.yaml")
    prod_namespace = load_yaml(KUSTOMIZE / "overlays" / "prod" / "kustomization.yaml")["namespace"]
    assert url.hostname == f"{service['metadata']['name']}.{prod_namespace}.svc"
    assert url.port == service["spec"]["ports"][0]["port"]
    assert url.path == ALERTS_PATH

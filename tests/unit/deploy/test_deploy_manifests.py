"""The kustomize overlays (deploy/kustomize) as `kubectl kustomize` renders them: every object valid for
Kubernetes 1.30 (kubernetes-validate, strict) or for its CRD, a least-privilege Role that covers every call
the bot makes, settings passed under their own names with the secrets referenced, a restricted pod, and
runbook links that reach the playbooks."""

from datetime import UTC, datetime
from pathlib import Path

import kmock
import kubernetes_validate
import pytest
from pydantic import AliasChoices

from actions.jobs.backends.kuberay import KubeRayBackend
from actions.jobs.planning import training_launch
from actions.jobs.templates import TINY_TRANSFORMER, load_templates
from actions.promotions.policy import promotion_targets
from actions.settings import CONFIG_ENV, Settings, load_settings
from bot.slack.authorization import Authorization
from diagnosers.findings import FINDING_IDS
from tests.builders.deploy import (
    KUSTOMIZE,
    OVERLAYS,
    PLAYBOOKS,
    ROLE,
    RUNBOOK_PLACEHOLDER,
    alerting_rules,
    load_yaml,
    of_kind,
    rendered,
    the,
)
from tests.builders.failed_rayjob import a_failed_job, collected
from tests.standins.crd_schema import problems, require_crd
from tests.standins.kube_standin import ServedStandin

KUBERNETES_VERSION = "1.30.0"
# Custom resources checked against their CRDs (tests/standins/crd_schema.py finds them).
CRD_GROUPS = {"ray.io"}
# The fields of prometheus-operator's PrometheusRule (monitoring.coreos.com/v1) that a rule file may use;
# promtool checks the groups themselves (tests/unit/deploy/test_deploy_alert_rules.py).
RULE_GROUP_KEYS = {"name", "interval", "rules", "limit", "partial_response_strategy", "labels", "query_offset"}
RULE_KEYS = {"alert", "record", "expr", "for", "keep_firing_for", "labels", "annotations"}
BASE_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ConfigMap", "Service", "PersistentVolumeClaim", "Deployment"}
EXPECTED_KINDS = {"dev": BASE_KINDS | {"PrometheusRule"}, "prod": BASE_KINDS | {"PrometheusRule", "Ingress"}}
# Read by the MLflow client library itself (basic auth to a tracking server), not by trainbot's settings.
MLFLOW_CLIENT_ENV = {"MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"}
SECRET_WORDS = ("TOKEN", "SECRET", "PASSWORD", "STATE_STORE_URL")
# The Role, exactly: what actions/jobs/backends/kuberay.py and the Kubernetes collector call, read verbs for what
# they read.
ROLE_RULES = [
    {"apiGroups": ["ray.io"], "resources": ["rayjobs"], "verbs": ["create", "get", "list", "watch", "patch", "delete"]},
    {"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
]
VERBS = {
    kmock.action.CREATE: "create",
    kmock.action.FETCH: "get",
    kmock.action.LIST: "list",
    kmock.action.WATCH: "watch",
    kmock.action.UPDATE: "patch",
    kmock.action.DELETE: "delete",
}


@pytest.fixture(params=OVERLAYS)
def overlay(request) -> str:
    return request.param


@pytest.fixture
def objects(overlay):
    return rendered(overlay)


def bot_container(objects) -> dict:
    (container,) = the(objects, "Deployment", "trainbot")["spec"]["template"]["spec"]["containers"]
    return container


def env_config_map(objects) -> dict[str, str]:
    return the(objects, "ConfigMap", "trainbot-env")["data"]


def requested(request: kmock.Request) -> tuple[str, str, str]:
    """(API group, resource or resource/subresource, verb), as RBAC names what a request needs."""
    resource = request.resource.plural + (f"/{request.subresource}" if request.subresource else "")
    return request.resource.group, resource, VERBS[request.action]


def setting_env_names() -> set[str]:
    """The environment variables actions/settings.py reads: TRAINBOT_<FIELD>, or the field's alias."""
    names = {CONFIG_ENV}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names.add(
            alias.choices[0]
            if isinstance(alias, AliasChoices)
            else f"{Settings.model_config['env_prefix']}{name}".upper()
        )
    return names


def granted(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


# Rendering and schemas.


def test_each_overlay_renders_the_whole_deployment(overlay, objects):
    assert {obj["kind"] for obj in objects} == EXPECTED_KINDS[overlay]
    namespaces = {obj["metadata"].get("namespace") for obj in objects}
    assert namespaces == {load_yaml(KUSTOMIZE / "overlays" / overlay / "kustomization.yaml")["namespace"]}
    assert not of_kind(objects, "Secret"), "secrets are created by hand (docs/deploy.md), never rendered from the repo"


def test_every_object_is_valid_for_kubernetes_1_30_or_its_crd(objects):
    for obj in objects:
        group = obj["apiVersion"].split("/")[0] if "/" in obj["apiVersion"] else ""
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        if obj["kind"] == "PrometheusRule":
            assert obj["apiVersion"] == "monitoring.coreos.com/v1" and set(obj["spec"]) == {"groups"}, where
            for rules in obj["spec"]["groups"]:
                assert set(rules) <= RULE_GROUP_KEYS, where
                assert all(set(rule) <= RULE_KEYS for rule in rules["rules"]), where
        elif group in CRD_GROUPS:
            assert [str(problem) for problem in problems(require_crd(obj["kind"]), obj)] == [], where
        else:
            try:
                kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
            except kubernetes_validate.ValidationError as error:
                pytest.fail(f"{where}: {'.'.join(map(str, error.path))}: {error.message}")


def test_the_strict_schemas_refuse_a_misspelt_field():
    deployment = dict(the(rendered("prod"), "Deployment", "trainbot"))
    deployment["spec"] = {**deployment["spec"], "replica": 1}
    with pytest.raises(kubernetes_validate.ValidationError, match="replica"):
        kubernetes_validate.validate(deployment, KUBERNETES_VERSION, strict=True)


# RBAC.


def test_the_role_is_namespaced_least_privilege_with_no_wildcard_and_no_secrets(objects):
    assert not of_kind(objects, "ClusterRole") and not of_kind(objects, "ClusterRoleBinding")
    role = the(objects, "Role", "trainbot")
    assert role["rules"] == ROLE_RULES
    for rule in role["rules"]:
        assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"]
        assert not {"secrets", "configmaps"} & set(rule["resources"])
    binding = the(objects, "RoleBinding", "trainbot")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "trainbot"}
    account = the(objects, "Deployment", "trainbot")["spec"]["template"]["spec"]["serviceAccountName"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": account, "namespace": role["metadata"]["namespace"]}
    ]
    assert the(objects, "ServiceAccount", account)


def test_every_kubernetes_call_the_bot_makes_is_granted_and_every_granted_resource_is_used(tmp_path):
    """Launch, follow, read logs, suspend and cancel a RayJob and collect a failed one against the API
    stand-in, then compare the verbs and resources it was asked for with the Role."""
    role = granted(load_yaml(ROLE)["rules"])
    with ServedStandin() as standin:
        backend = KubeRayBackend(Settings(data_dir=tmp_path, namespace="default"), standin.api_client())
        launch = training_launch(TINY_TRANSFORMER, TINY_TRANSFORMER.parse_params([]), (2, 1), "alice")
        backend.submit(launch)
        backend.status(launch.name)
        list(backend.observe(timeout_s=0.2))
        standin.add_pod(f"{launch.name}-s", {"batch.kubernetes.io/job-name": launch.name}, "hi\n", datetime.now(UTC))
        backend.logs(launch.name)
        backend.cancel(launch.name, suspend=True)
        backend.cancel(launch.name)
        a_failed_job(standin)
        collected(standin, tmp_path / "bundle")
        used = {requested(request) for request in standin.api if request.resource is not None}
    assert used <= role, f"called without a grant: {sorted(used - role)}"
    assert {(group, resource) for group, resource, _ in used} == {(group, resource) for group, resource, _ in role}


# The bot's container.


def test_environment_variables_are_the_settings_own_names(objects):
    known = setting_env_names()
    passed = {variable["name"] for variable in bot_container(objects)["env"]} | set(env_config_map(objects))
    assert passed - MLFLOW_CLIENT_ENV <= known, f"not settings: {sorted(passed - MLFLOW_CLIENT_ENV - known)}"
    assert {"SLACK_BOT_TOKEN", "TRAINBOT_NAMESPACE", "TRAINBOT_BACKEND", "TRAINBOT_DATA_DIR", CONFIG_ENV} <= passed


def test_secrets_are_referenced_never_written(objects):
    for variable in bot_container(objects)["env"]:
        if any(word in variable["name"] for word in SECRET_WORDS) or variable["name"] in MLFLOW_CLIENT_ENV:
            assert "value" not in variable, variable["name"]
            assert variable["valueFrom"]["secretKeyRef"]["name"].startswith("trainbot-"), variable["name"]
    assert not [key for key in env_config_map(objects) if any(word in key for word in SECRET_WORDS)]
    assert "envFrom" in bot_container(objects)
    assert all("secretRef" not in source for source in bot_container(objects)["envFrom"])


def test_the_settings_load_from_what_the_pod_gets(objects, tmp_path, monkeypatch):
    """The ConfigMap's variables and the YAML file pass the settings' own validation, and the YAML's
    permissions, promotion targets and templates parse as the bot parses them."""
    container = bot_container(objects)
    (mount,) = [mount for mount in container["volumeMounts"] if mount["name"] == "config"]
    config = {variable["name"]: variable.get("value") for variable in container["env"]}[CONFIG_ENV]
    assert Path(config).parent == Path(mount["mountPath"])
    volumes = {
        volume["name"]: volume
        for volume in the(objects, "Deployment", "trainbot")["spec"]["template"]["spec"]["volumes"]
    }
    config_map = the(objects, "ConfigMap", "trainbot-config")
    assert volumes["config"]["configMap"]["name"] == config_map["metadata"]["name"]
    yaml_file = tmp_path / Path(config).name
    yaml_file.write_text(config_map["data"][Path(config).name], encoding="utf-8")
    for name, value in env_config_map(objects).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv(CONFIG_ENV, str(yaml_file))
    settings = load_settings()
    assert set(load_yaml(yaml_file) or {}) <= set(Settings.model_fields)
    Authorization(settings.slack_commands)
    promotion_targets(settings.promotion)
    load_templates(settings.templates)
    assert settings.backend == "kuberay"
    (data,) = [mount for mount in container["volumeMounts"] if mount["name"] == "data"]
    assert settings.data_dir == Path(data["mountPath"])
    claim = volumes["data"]["persistentVolumeClaim"]["claimName"]
    assert the(objects, "PersistentVolumeClaim", claim)["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_the_pod_meets_the_restricted_pod_security_standard(objects):
    pod = the(objects, "Deployment", "trainbot")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] > 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod)
    assert all("hostPath" not in volume for volume in pod["volumes"])
    context = bot_container(objects)["securityContext"]
    assert context == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    # Kubernetes would add TRAINBOT_PORT=tcp://... for the Service named trainbot: a settings-shaped name.
    assert pod["enableServiceLinks"] is False


def test_the_container_has_resources_and_probes_on_healthz(objects):
    container = bot_container(objects)
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    (port,) = container["ports"]
    for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": port["name"]}, probe
    assert container["args"][: container["args"].index("--port") + 2] == [
        "serve", "--host", "0.0.0.0", "--port", str(port["containerPort"])
    ]  # fmt: skip


def test_the_bot_stops_within_its_grace_before_kubernetes_kills_it(objects):
    pod = the(objects, "Deployment", "trainbot")["spec"]["template"]["spec"]
    args = bot_container(objects)["args"]
    grace = float(args[args.index("--grace") + 1])
    # Room for the last log lines and the process's exit after the grace.
    assert grace + 5 <= pod["terminationGracePeriodSeconds"]


def test_one_replica_replaced_not_rolled(objects):
    deployment = the(objects, "Deployment", "trainbot")
    assert deployment["spec"]["replicas"] == 1
    assert deployment["spec"]["strategy"] == {"type": "Recreate"}


def test_the_service_selects_the_pod_and_its_port(objects):
    service = the(objects, "Service", "trainbot")
    pod = the(objects, "Deployment", "trainbot")["spec"]["template"]
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == bot_container(objects)["ports"][0]["name"]


def test_dev_takes_slack_over_socket_mode_and_prod_over_an_ingress_for_slack_alone():
    dev, prod = rendered("dev"), rendered("prod")
    assert "--socket-mode" in bot_container(dev)["args"]
    assert not of_kind(dev, "Ingress")
    assert "--socket-mode" not in bot_container(prod)["args"]
    ingress = the(prod, "Ingress", "trainbot")
    (rule,) = ingress["spec"]["rules"]
    (path,) = rule["http"]["paths"]
    assert (path["path"], path["pathType"]) == ("/slack/events", "Exact")
    assert path["backend"]["service"] == {"name": "trainbot", "port": {"name": "http"}}
    assert ingress["spec"]["tls"][0]["hosts"] == [rule["host"]]
    state = {variable["name"]: variable for variable in bot_container(prod)["env"]}["TRAINBOT_STATE_STORE_URL"]
    assert state["valueFrom"]["secretKeyRef"] == {"name": "trainbot-state", "key": "url"}


# Alerts in the cluster.


def test_every_alert_links_its_playbook_under_the_overlays_runbook_base(objects):
    base = env_config_map(objects)["TRAINBOT_RUNBOOK_BASE_URL"]
    assert base.startswith("https://") and not base.endswith("/")
    rule = the(objects, "PrometheusRule", "trainbot-training")
    for alert in alerting_rules(rule["spec"]["groups"]):
        link = alert["annotations"]["runbook_url"]
        finding = link.removeprefix(f"{base}/").removesuffix(".md")
        assert link == f"{base}/{finding}.md" and finding in FINDING_IDS, link
        assert (PLAYBOOKS / f"{finding}.md").is_file()
    assert f"{RUNBOOK_PLACEHOLDER}/" not in str(objects)

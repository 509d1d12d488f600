"""The one settings object: environment variables (TRAINBOT_*) over an optional YAML file.

Every setting has a default that works on one machine. TRAINBOT_CONFIG names the YAML file. The data
directory, where trainbot keeps its state and its local Ray head, is chosen once (`resolve_data_dir`): the
setting, else the nearest `.trainbot` folder upward from the working directory, else a per-user folder.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import platformdirs
import yaml
from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, ValidationError, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from actions.errors import SettingsError
from diagnosers.collect.target import DCGM_METRICS
from diagnosers.limits import MIB, Limits
from diagnosers.scaling import DEFAULT_EFFICIENCY_THRESHOLD

log = logging.getLogger(__name__)

CONFIG_ENV = "TRAINBOT_CONFIG"
DATA_DIR_ENV = "TRAINBOT_DATA_DIR"
DATA_DIR_NAME = ".trainbot"
PRIVATE_DIR_MODE = 0o700
MASK = "***"
USER_PASSWORD = re.compile(r"^(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@]*):.*@(?P<host>[^@]*)$", re.DOTALL)
# Query parameters whose values are credentials (?token=..., ?api_key=..., ?password=...).
SECRET_QUERY = re.compile(r"(?P<key>[?&][^=&#]*(?:token|pass|secret|key|auth|sig|cred)[^=&#]*=)[^&#]*", re.IGNORECASE)


# The backends a job can run on (actions/jobs/backends registers one for each).
BackendName = Literal["local", "kuberay"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="TRAINBOT_", extra="ignore")

    # Unset: resolve_data_dir chooses it (the nearest .trainbot upward, else the per-user folder).
    data_dir: Path = Path(DATA_DIR_NAME)
    _data_dir_reason: str = PrivateAttr(default="")
    log_level: str = "INFO"

    # Launching: `local` runs a Ray head on this machine; `kuberay` submits RayJobs. The one spelling of the
    # backends' names: actions/jobs/backends' registry takes them from here.
    backend: BackendName = "local"
    # Job templates by name, beside the built-in tiny-transformer (see actions/jobs/templates.py).
    templates: dict[str, dict[str, Any]] = Field(default_factory=dict)

    # Local backend: the Ray head this data directory starts on 127.0.0.1, on free ports it records there
    # (actions/jobs/backends/local_head.py). A dashboard port set here (or TRAINBOT_RAY_DASHBOARD_URL) names
    # the head to use instead, whoever started it; the GCS port goes with a dashboard port (unset: a free one).
    local_dashboard_port: int | None = Field(default=None, ge=1, le=65535)
    local_gcs_port: int | None = Field(default=None, ge=1, le=65535)
    local_num_cpus: int | None = Field(default=None, ge=1)

    # KubeRay backend. No kubeconfig context means in-cluster config, then ~/.kube/config.
    namespace: str = "default"
    kube_context: str | None = None
    # The image deploy/ builds: Ray, torch and trainbot's workloads (the built-in template runs from it).
    image: str = "ghcr.io/trainbot/trainbot:0.1.0"
    ttl_seconds_after_finished: int = Field(default=3600, ge=0)

    # MLflow: None means the sqlite store in the data directory (the embedded default).
    mlflow_tracking_uri: str | None = None
    # MLflow's client takes these from its own variables (MLFLOW_HTTP_REQUEST_TIMEOUT, _MAX_RETRIES,
    # _BACKOFF_FACTOR, _BACKOFF_JITTER), set from here unless already set. Its defaults (120 s, 7 retries,
    # factor 2) held `model promote` for 4 minutes against a closed port; these answer within 10 s. Raise the
    # timeout for an MLflow whose searches (a sweep's runs) take longer.
    mlflow_request_timeout_s: int = Field(default=2, ge=1)
    mlflow_request_max_retries: int = Field(default=1, ge=0, le=10)
    mlflow_request_backoff_factor: int = Field(default=1, ge=0, le=120)
    mlflow_request_backoff_jitter: float = Field(default=0.5, ge=0)
    # Who is who: each person's name (as `--as NAME` says it) and Slack user id, {alice: U02ALICE}. Trainbot
    # records and shows the name, and mentions the id in Slack (see actions/people.py).
    people: dict[str, str] = Field(default_factory=dict)
    # Model promotion targets and their approvers (see actions/promotions/policy.py).
    promotion: dict[str, Any] = Field(default_factory=dict)
    # How long one process holds an alias move before another may take it over (the move takes a second or
    # two), and how often `trainbot serve` finishes the moves whose holder died (kill -9, a lost node).
    promotion_lease_s: float = Field(default=120.0, gt=0)
    promotion_sweep_s: float = Field(default=15.0, gt=0)
    # The secret MLflow signs its webhook deliveries with (`trainbot model webhook URL` gives it to MLflow).
    mlflow_webhook_secret: SecretStr = SecretStr("")
    # The state store: a PostgreSQL URL works the same; None means sqlite in the data directory.
    state_store_url: str | None = None
    # PostgreSQL: a statement, or a wait for a lock, that runs longer than this is ended by the server.
    state_store_statement_timeout_s: float = Field(default=30.0, gt=0)
    state_store_lock_timeout_s: float = Field(default=10.0, gt=0)

    # Every other service (PostgreSQL, the Kubernetes API, the Ray dashboard, Slack): seconds to connect,
    # and to wait for each answer. A silent service is named in one line within about 10 s.
    connect_timeout_s: float = Field(default=3.0, ge=1)
    read_timeout_s: float = Field(default=6.0, gt=0)

    # Live collection (trainbot diagnose JOB / collect JOB). No Prometheus URL: metrics "not-configured".
    prometheus_url: str = ""
    prometheus_token: SecretStr = SecretStr("")
    # true, false, or the path of a CA bundle for a Prometheus behind private TLS.
    prometheus_verify: bool | str = True
    # dcgm-exporter's default counters; Ray's ray_node_* metrics are read when none of these has a series.
    prometheus_metrics: tuple[str, ...] = DCGM_METRICS
    prometheus_pod_label: str = "pod"
    prometheus_host_label: str = "Hostname"
    # The Ray dashboard to read, and for the local backend the head its jobs go to; empty means the local
    # head's or the RayJob's own (status.dashboardURL).
    ray_dashboard_url: str = ""
    ray_dashboard_token: SecretStr = SecretStr("")
    collect_deadline_s: float = Field(default=60.0, gt=0)
    collect_request_timeout_s: float = Field(default=10.0, gt=0)
    collect_log_max_mb: int = Field(default=8, ge=1)
    # Reading a bundle (diagnosers/limits.py): decompressed MB per archive file and in all, and seconds.
    bundle_max_file_mb: int = Field(default=Limits().file_bytes // MIB, ge=1)
    bundle_max_total_mb: int = Field(default=Limits().total_bytes // MIB, ge=1)
    bundle_deadline_s: float = Field(default=Limits().seconds, gt=0)
    # A scaling study (trainbot scale) points at the first size whose efficiency (speedup over N / N0) is under this.
    scale_efficiency_threshold: float = Field(default=DEFAULT_EFFICIENCY_THRESHOLD, gt=0, le=1)
    # A study's point still running after this long is stopped, and the study ends there.
    scale_point_timeout_s: float = Field(default=3600.0, gt=0)

    # Slack, under the names Bolt gives them (no TRAINBOT_ prefix).
    slack_bot_token: SecretStr = Field(
        default=SecretStr(""), validation_alias=AliasChoices("SLACK_BOT_TOKEN", "slack_bot_token")
    )
    slack_signing_secret: SecretStr = Field(
        default=SecretStr(""), validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "slack_signing_secret")
    )
    # The app-level token (xapp-, scope connections:write) that `trainbot serve --socket-mode` opens its
    # WebSocket with; Socket Mode needs no signing secret.
    slack_app_token: SecretStr = Field(
        default=SecretStr(""), validation_alias=AliasChoices("SLACK_APP_TOKEN", "slack_app_token")
    )
    # The Web API base URL: Slack's own, or a proxy (or a test's stand-in).
    slack_api_url: str = "https://slack.com/api/"
    # Where alert threads go, and (unless TRAINBOT_PROMOTIONS_CHANNEL names another) registry notices.
    alerts_channel: str = ""
    # Alertmanager's API, for the "Silence 2h" button under an alert thread; empty: no button.
    alertmanager_url: str = ""
    # Which alert labels say the job an alert thread is for (actions/alerts/threads.py): `namespace`, when
    # listed, qualifies the job; of the others, the first an alert carries, in this order, names it.
    alert_thread_labels: list[str] = Field(default_factory=lambda: ["namespace", "rayjob", "job"])
    promotions_channel: str = ""
    # Where the runbooks are published: a diagnosis links <base>/<finding id>.md. Empty: the bot posts the
    # runbook's text in the diagnosis thread instead.
    runbook_base_url: str = ""
    # Threads for the work behind Slack's acks. More than the cores slows the acks themselves
    # (bench/ack_latency.py on 2 cores: p99 1.2x a bare Bolt app with 2, 2-2.5x with 4).
    slack_workers: int = Field(default=2, ge=1, le=64)
    # Work bound for one backend (MLflow, jobs, diagnosis, Alertmanager) runs on that backend's own threads,
    # this many each, so a backend that hangs cannot take the workers everything else needs.
    slack_backend_workers: int = Field(default=2, ge=1, le=16)
    # Who may run which slash command, and in which channels (see bot/slack/authorization.py).
    slack_commands: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _choose_data_dir(self) -> Settings:
        given = self.data_dir if "data_dir" in self.model_fields_set else None
        self.data_dir, self._data_dir_reason = resolve_data_dir(given)
        return self

    def data_dir_reason(self) -> str:
        """Why this data directory: the setting that named it, the .trainbot found, or the per-user default."""
        return self._data_dir_reason

    def bundle_limits(self) -> Limits:
        return Limits(self.bundle_max_file_mb * MIB, self.bundle_max_total_mb * MIB, self.bundle_deadline_s)

    def runs_dir(self) -> Path:
        """Where local jobs write their step timings and checkpoints: <data dir>/runs/<job>."""
        return (self.data_dir / "runs").resolve()

    def tracking_uri(self) -> str:
        if self.mlflow_tracking_uri:
            return self.mlflow_tracking_uri
        return f"sqlite:///{(self.data_dir / 'mlflow.db').resolve()}"

    def state_url(self) -> str:
        """The SQLAlchemy URL of the state store (jobs, who launched what, state history).

        A PostgreSQL URL gets the connect timeout and the server-side statement and lock timeouts as libpq
        parameters, except those it already names: what the URL says wins.
        """
        if not self.state_store_url:
            return f"sqlite:///{(self.data_dir / 'state.db').resolve()}"
        if not self.state_store_url.startswith("postgresql"):
            return self.state_store_url
        parts = urlsplit(self.state_store_url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        # libpq takes whole seconds and treats less than 2 as 2.
        query.setdefault("connect_timeout", str(max(2, round(self.connect_timeout_s))))
        options = query.get("options", "")
        server_timeouts = {
            "statement_timeout": self.state_store_statement_timeout_s,
            "lock_timeout": self.state_store_lock_timeout_s,
        }
        for name, seconds in server_timeouts.items():
            if name not in options:
                options = f"{options} -c {name}={round(seconds * 1000)}".strip()
        query["options"] = options
        return urlunsplit(parts._replace(query=urlencode(query, quote_via=quote)))

    def shown(self) -> dict[str, Any]:
        """The settings as `trainbot config` prints them, the data directory first with why it was chosen;
        secrets and the credentials inside URLs masked."""
        shown = _masked(self.model_dump(mode="json"))
        return {"data_dir": shown.pop("data_dir"), "data_dir_chosen_by": self._data_dir_reason, **shown}

    def private_data_dir(self) -> Path:
        """The data directory, created 0700 (and made so, where an older trainbot left it open)."""
        self.data_dir.mkdir(mode=PRIVATE_DIR_MODE, parents=True, exist_ok=True)
        try:
            self.data_dir.chmod(PRIVATE_DIR_MODE)
        except PermissionError:  # a volume's mount point owned by root: its files are still 0600
            log.debug("cannot chmod %s; leaving its mode", self.data_dir)
        return self.data_dir

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        config = os.environ.get(CONFIG_ENV)
        return init_settings, env_settings, _YamlFile(settings_cls, Path(config) if config else None)


class _YamlFile(PydanticBaseSettingsSource):
    """Values from the YAML file named by TRAINBOT_CONFIG; below the environment in priority."""

    def __init__(self, settings_cls: type[BaseSettings], path: Path | None) -> None:
        super().__init__(settings_cls)
        self._values = _read_yaml(path) if path else {}

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return self._values.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self._values)


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise SettingsError(f"{CONFIG_ENV}={path}: cannot read it ({error.strerror})") from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise SettingsError(f"{CONFIG_ENV}={path}: not valid YAML ({str(error).splitlines()[0]})") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise SettingsError(f"{CONFIG_ENV}={path}: the top level must be a mapping of setting names")
    return document


def resolve_data_dir(given: Path | None) -> tuple[Path, str]:
    """The data directory and why it was chosen: `given` (the setting), else the nearest .trainbot folder in
    the working directory or above it, else the per-user data folder (platformdirs)."""
    if given is not None:
        return given, _setting_source()
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / DATA_DIR_NAME).is_dir():
            return folder / DATA_DIR_NAME, f"found {DATA_DIR_NAME} in {folder}"
    return Path(platformdirs.user_data_dir("trainbot", appauthor=False)), "per-user default"


def _setting_source() -> str:
    """Which setting named the data directory, in the sources' order of priority (given, environment, file)."""
    if DATA_DIR_ENV in os.environ:
        return DATA_DIR_ENV
    config = os.environ.get(CONFIG_ENV)
    return f"data_dir in {config}" if config else "given"


def masked_url(url: str) -> str:
    """`url` with the password of its user part and credential-like query values replaced by ***.

    Text surgery rather than a parse and rebuild, which would change the rest (sqlite://// loses a slash).
    A password may hold an unescaped @ or /, so it runs to the last @: where that @ is in a path, more
    than the password is masked, never less.
    """
    url = USER_PASSWORD.sub(rf"\g<head>:{MASK}@\g<host>", url, count=1)
    return SECRET_QUERY.sub(rf"\g<key>{MASK}", url)


def _masked(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_masked(item) for item in value]
    return masked_url(value) if isinstance(value, str) and "://" in value else value


def load_settings() -> Settings:
    try:
        return Settings()
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
        source = os.environ.get(CONFIG_ENV) or "the TRAINBOT_* environment"
        raise SettingsError(f"invalid settings ({problems}); fix {source}") from None

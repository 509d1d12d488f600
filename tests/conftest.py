"""Fixtures every test folder shares."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from actions.promotions.registry import MLFLOW_HTTP_VARIABLES
from tests.servers.postgres import create_database, private_cluster, server_bin_dir
from tests.standins.kube_standin import ServedStandin
from tests.standins.slack_standin import SlackStandIn, slack_standin

# In CI a missing PostgreSQL must fail the run, not skip half the store suite.
REQUIRE_POSTGRES = os.environ.get("CI") == "true"
DIALECTS = ["sqlite", "postgresql"]


@pytest.fixture(autouse=True)
def _mlflow_http_variables() -> Iterator[None]:
    """Promotions set MLflow's timeout variables for the whole process (actions/promotions/registry.py): each test
    starts without them and ends with the environment as it was, so one test's settings never become the next one's."""
    saved = {variable: os.environ.pop(variable) for variable in MLFLOW_HTTP_VARIABLES if variable in os.environ}
    yield
    for variable in MLFLOW_HTTP_VARIABLES:
        os.environ.pop(variable, None)
    os.environ.update(saved)


@pytest.fixture
def slack() -> Iterator[SlackStandIn]:
    """The local Slack, recording what the bot calls; a test module may override it (user groups, Socket Mode)."""
    with slack_standin() as served:
        yield served
    # Whatever the test checked, Slack would have refused these: a limit the bot's rendering broke.
    served.check_within_limits()


@pytest.fixture
def kuberay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ServedStandin]:
    """A fresh KubeRay stand-in, named by the kubeconfig `kubeconfig` gives: the bot in the test's own process finds
    it there, and the test writes its RayJobs' status as the operator would."""
    with ServedStandin() as standin:
        path = standin.kubeconfig(tmp_path / "kubeconfig")
        # The client reads $KUBECONFIG once, when it is imported.
        monkeypatch.setattr(kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(path))
        yield standin


@pytest.fixture
def kubeconfig(kuberay: ServedStandin, tmp_path: Path) -> Path:
    """The kubeconfig naming the `kuberay` stand-in: give it to a `trainbot` as KUBECONFIG."""
    return tmp_path / "kubeconfig"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """One private PostgreSQL cluster for the test session (Debian's server, a temp dir, a free loopback port)."""
    bin_dir = server_bin_dir()
    if bin_dir is None:
        reason = "PostgreSQL's server is not installed (apt-get install -y postgresql; `make test` does it as root)"
        if REQUIRE_POSTGRES:
            pytest.fail(reason)
        pytest.skip(reason)
    with private_cluster(bin_dir) as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    """A fresh, empty database on the session's cluster."""
    return create_database(postgres_server)


@pytest.fixture(params=DIALECTS)
def state_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The state store URL, once per dialect: every store test runs on sqlite and on PostgreSQL."""
    return _fresh_store(request, tmp_path)


@pytest.fixture(scope="module", params=DIALECTS)
def module_state_store_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """state_store_url for a module whose servers (`trainbot serve`, Alertmanager) serve all of its tests."""
    return _fresh_store(request, tmp_path_factory.mktemp("state"))


def _fresh_store(request: pytest.FixtureRequest, folder: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{folder / 'state.db'}"
    return create_database(request.getfixturevalue("postgres_server"))

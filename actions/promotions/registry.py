"""The MLflow model registry as promotions use it: versions, their runs' metrics, aliases and tags.

MlflowClient against TRAINBOT_MLFLOW_TRACKING_URI (the sqlite file in the data directory by default),
imported only when a promotion needs it. MLflow's errors become ours, with what to do.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actions.errors import ActionError, NotFound, Unavailable
from actions.service_failure import failure_reason, without_credentials

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities.webhook import Webhook
    from mlflow.exceptions import MlflowException

    from actions.settings import Settings

# What MLflow's HTTP client reads for each request, in MlflowHttp's order.
MLFLOW_HTTP_VARIABLES = (
    "MLFLOW_HTTP_REQUEST_TIMEOUT",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER",
)
MISSING_CODES = ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND")
# MLflow answers an alias that names nothing with this code and a "not found" message.
INVALID = "INVALID_PARAMETER_VALUE"
# After MLflow could not be reached, calls fail at once for this long: a command that makes several calls
# (an approval reads the alias, then records the failure in tags) waits out the timeout once, not each time.
UNREACHABLE_HOLD_S = 15.0


@dataclass(frozen=True)
class MlflowHttp:
    """The timeout and retries of MLflow's HTTP client, which reads them from its environment variables."""

    timeout_s: int
    max_retries: int
    backoff_factor: int
    backoff_jitter: float

    @classmethod
    def of(cls, settings: Settings) -> MlflowHttp:
        return cls(
            settings.mlflow_request_timeout_s,
            settings.mlflow_request_max_retries,
            settings.mlflow_request_backoff_factor,
            settings.mlflow_request_backoff_jitter,
        )

    def apply(self) -> None:
        """Set MLflow's variables for this process, except those a person already set."""
        for variable, value in self.variables().items():
            os.environ.setdefault(variable, str(value))

    def variables(self) -> dict[str, int | float]:
        values = (self.timeout_s, self.max_retries, self.backoff_factor, self.backoff_jitter)
        return dict(zip(MLFLOW_HTTP_VARIABLES, values, strict=True))


@dataclass(frozen=True)
class ModelVersion:
    model: str
    version: int
    run_id: str | None
    run_status: str | None
    metrics: dict[str, float]


class Registry:
    def __init__(self, tracking_uri: str, http: MlflowHttp | None = None) -> None:
        """`http`: the timeout and retries to give MLflow's client; None leaves its environment as it is."""
        self.tracking_uri = tracking_uri
        self._http = http
        self._client: MlflowClient | None = None
        # What the last "cannot be reached" said, and until when (time.monotonic()) it answers every call.
        self._unreachable_until: tuple[str, float] | None = None

    def version(self, model: str, version: int) -> ModelVersion:
        with self._answering(f"{model} version {version}"):
            found = self.client().get_model_version(model, str(version))
            if not found.run_id:
                return ModelVersion(model, version, None, None, {})
            run = self.client().get_run(found.run_id)
            return ModelVersion(model, version, found.run_id, run.info.status, dict(run.data.metrics))

    def alias_holder(self, model: str, alias: str) -> int | None:
        """The version `alias` names, or None when it names none yet."""
        with self._answering(f"{model}@{alias}"):
            try:
                return int(self.client().get_model_version_by_alias(model, alias).version)
            except _mlflow_exception() as error:
                if error.error_code == INVALID and "not found" in error.message:
                    return None
                raise

    def move_alias(self, model: str, alias: str, version: int) -> None:
        with self._answering(f"{model}@{alias}"):
            self.client().set_registered_model_alias(model, alias, str(version))

    def tag(self, model: str, version: int, tags: dict[str, str]) -> None:
        with self._answering(f"{model} version {version}"):
            for key, value in tags.items():
                self.client().set_model_version_tag(model, str(version), key, value)

    def register_webhook(self, name: str, url: str, events: Sequence[str], secret: str) -> str:
        """Create the webhook `name`, or point the one there is at `url`: "created" or "updated"."""
        with self._answering("MLflow webhooks"):
            existing = next((hook for hook in self._webhooks() if hook.name == name), None)
            if existing is None:
                self.client().create_webhook(name, url, list(events), secret=secret)
                return "created"
            hook = existing.webhook_id
            self.client().update_webhook(hook, url=url, events=list(events), secret=secret, status="ACTIVE")
            return "updated"

    def _webhooks(self) -> Iterator[Webhook]:
        page_token = None
        while True:
            page = self.client().list_webhooks(page_token=page_token)
            yield from page
            if not page.token:
                return
            page_token = page.token

    def client(self) -> MlflowClient:
        if self._client is None:
            from mlflow import MlflowClient  # noqa: PLC0415 - MLflow loads only where promotions need it

            if self._http is not None:
                self._http.apply()
            self._client = MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)
        return self._client

    @contextmanager
    def _answering(self, what: str) -> Iterator[None]:
        held = self._unreachable_until
        if held is not None and time.monotonic() < held[1]:
            raise Unavailable(held[0])
        try:
            yield
        except ActionError:
            raise
        except _mlflow_exception() as error:
            if error.error_code in MISSING_CODES:
                raise NotFound(f"MLflow has no {what}; check the model name and version") from None
            # MLflow wraps the HTTP client's failure (refused, timed out after its retries) in its own error.
            request_failure = error.__cause__ or error.__context__
            if isinstance(request_failure, OSError):
                raise self._unreachable(request_failure) from None
            raise Unavailable(f"MLflow could not answer for {what}: {error.message.splitlines()[0][:300]}") from None
        except OSError as error:
            raise self._unreachable(error) from None

    def _unreachable(self, error: OSError) -> Unavailable:
        """The error that says so, held for UNREACHABLE_HOLD_S."""
        from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_TIMEOUT  # noqa: PLC0415

        unreachable = Unavailable(
            f"MLflow at {without_credentials(self.tracking_uri)} cannot be reached "
            f"({failure_reason(error, MLFLOW_HTTP_REQUEST_TIMEOUT.get())}); "
            "check that it is up and that TRAINBOT_MLFLOW_TRACKING_URI names it"
        )
        self._unreachable_until = (str(unreachable), time.monotonic() + UNREACHABLE_HOLD_S)
        return unreachable


def _mlflow_exception() -> type[MlflowException]:
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    return MlflowException

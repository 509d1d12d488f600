"""The MLflow model registry as promotions use it: versions, their runs' metrics, aliases and tags.

MlflowClient against TRAINBOT_MLFLOW_TRACKING_URI (the sqlite file in the data directory by default),
imported only when a promotion needs it. MLflow's errors become ours, with what to do.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from actions.errors import ActionError, NotFound, Unavailable

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities.webhook import Webhook
    from mlflow.exceptions import MlflowException

MISSING_CODES = ("RESOURCE_DOES_NOT_EXIST", "NOT_FOUND")
# MLflow answers an alias that names nothing with this code and a "not found" message.
INVALID = "INVALID_PARAMETER_VALUE"


@dataclass(frozen=True)
class ModelVersion:
    model: str
    version: int
    run_id: str | None
    run_status: str | None
    metrics: dict[str, float]


class Registry:
    def __init__(self, tracking_uri: str) -> None:
        self.tracking_uri = tracking_uri
        self._client: MlflowClient | None = None

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

            self._client = MlflowClient(tracking_uri=self.tracking_uri, registry_uri=self.tracking_uri)
        return self._client

    @contextmanager
    def _answering(self, what: str) -> Iterator[None]:
        try:
            yield
        except ActionError:
            raise
        except _mlflow_exception() as error:
            if error.error_code in MISSING_CODES:
                raise NotFound(f"MLflow has no {what}; check the model name and version") from None
            raise Unavailable(f"MLflow could not answer for {what}: {error.message.splitlines()[0][:300]}") from None
        except OSError as error:
            raise Unavailable(
                f"MLflow at {self.tracking_uri} cannot be reached ({error}); check TRAINBOT_MLFLOW_TRACKING_URI"
            ) from None


def _mlflow_exception() -> type[MlflowException]:
    from mlflow.exceptions import MlflowException  # noqa: PLC0415

    return MlflowException

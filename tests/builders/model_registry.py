"""Model versions in a real MLflow registry, as the tests make them, and which version an alias names."""

from mlflow import MlflowClient


def register(client: MlflowClient, model: str, metrics: dict[str, float], finished: bool = True) -> int:
    """A new version of `model` from a run in the "sweeps" experiment that logged `metrics`; its number."""
    experiment = client.get_experiment_by_name("sweeps")
    run = client.create_run(experiment.experiment_id)
    for key, value in metrics.items():
        client.log_metric(run.info.run_id, key, value)
    if finished:
        client.set_terminated(run.info.run_id)
    version = client.create_model_version(model, source=f"runs:/{run.info.run_id}/model", run_id=run.info.run_id)
    return int(version.version)


def alias(client: MlflowClient, model: str, target: str) -> int | None:
    """The version the alias `target` of `model` names; None when it names none."""
    return next((int(v) for name, v in client.get_registered_model(model).aliases.items() if name == target), None)

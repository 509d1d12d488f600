"""Job records as the tests make them: a state store with its schema, a tiny-transformer launch, and that
launch recorded as the local backend records it."""

from actions.jobs.job import JobState, JobStatus, Launch
from actions.jobs.records import Store
from actions.jobs.templates import TINY_TRANSFORMER


def open_store(url: str) -> Store:
    """The state store at `url`, its schema created."""
    store = Store(url)
    store.create_schema()
    return store


def launch(name: str, requester: str = "alice", params: dict | None = None, workers: int = 2) -> Launch:
    """A tiny-transformer training launch on `workers` one-GPU workers."""
    params = {"lr": 0.001, "strategy": "fsdp"} if params is None else params
    return Launch(
        name=name,
        kind="train",
        template=TINY_TRANSFORMER,
        params=params,
        workers=workers,
        gpus_per_worker=1,
        requester=requester,
        argv=TINY_TRANSFORMER.argv(params, workers, 1),
    )


def launched(store: Store, name: str, requester: str = "alice", state: JobState = JobState.PENDING) -> None:
    store.record_launch(launch(name, requester), "local", JobStatus(name, state))

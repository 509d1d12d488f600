"""Scaling studies in the state store, on sqlite and PostgreSQL: made running, a job a size, then ended."""

import pytest

from actions.errors import Conflict, NotFound
from actions.jobs.studies import NewStudy, StudyStatus, StudyStore

ASKED = NewStudy(
    id="scale-tiny-transformer-abc123", template="tiny-transformer", requester="alice", backend="local",
    params={"lr": 0.001, "batch_size": 32}, sizes=(1, 2, 4), gpus_per_worker=0, batch_mode="global", steps=40,
)  # fmt: skip


@pytest.fixture
def studies(state_store_url):
    store = StudyStore(state_store_url)
    store.create_schema()
    yield store
    store.close()


def test_a_study_is_kept_with_its_jobs_in_size_order_and_its_end(studies):
    made = studies.create(ASKED)
    assert (made.status, made.jobs, made.sizes, made.reason) == (StudyStatus.RUNNING, (), (1, 2, 4), "")
    studies.add_job(ASKED.id, "tiny-transformer-aaa111")
    studies.add_job(ASKED.id, "tiny-transformer-bbb222")
    ended = studies.finish(ASKED.id, StudyStatus.FAILED, "the 2-worker point FAILED: out of memory")
    again = StudyStore(studies.engine.url.render_as_string(hide_password=False)).get(ASKED.id)
    assert again == ended
    assert again.jobs == ("tiny-transformer-aaa111", "tiny-transformer-bbb222")
    assert (again.status, again.reason) == (StudyStatus.FAILED, "the 2-worker point FAILED: out of memory")
    assert again.params == {"lr": 0.001, "batch_size": 32} and again.batch_mode == "global" and again.steps == 40
    assert again.updated_at >= again.created_at
    assert again.to_dict()["jobs"] == ["tiny-transformer-aaa111", "tiny-transformer-bbb222"]


def test_a_taken_id_is_a_conflict_and_an_unknown_one_is_not_found(studies):
    studies.create(ASKED)
    with pytest.raises(Conflict, match="already exists"):
        studies.create(ASKED)
    with pytest.raises(NotFound, match="no scaling study is named scale-nope"):
        studies.get("scale-nope")
